"""test_fields_daemon.py - kind-fields datasets through ringfeedd into
version-3 rings, read without the Python binding: datasets written by
tests/fields_tool (the C writer with a schema), rings read by the same tool
(the raw header, field table and slots), parsed here.

Checked: every FIXED column's bytes (tensor, scalars, the image after
transform none, its mask), RAGGED columns' int64 offsets (0, monotone,
ending at the batch's rows, repeated past the count) and values against the
source samples, ring_sample.label from the "label" scalar, boxes through
the image's view with a dropped box counted (slot and STATS), a batch over
a ragged field's capacity failing the stream with the field and the figures,
ATTACH field= resolved and refused with the fields listed, a version-2
client refused a kind-fields dataset, a jpeg/tensor dataset served to a
version-3 client with its label column equal to the labels, a
version-2 client of it unchanged, and a client that rewrote its field
table getting the very bytes of one that did not (workers never read it).
"""
import os
import random
import struct
import subprocess

import numpy as np
import pytest

from conftest import FMNIST, binary, idx_images, idx_labels, wait_for, workers_held

RING_HDR = 4096
FIELDS_AT = 1024
FIXED, RAGGED = 1, 2
NP_DTYPE = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.float32, 6: np.float64,
            7: np.int64, 8: np.float16, 10: np.uint16}


def tool():
    return binary("tests/fields_tool")


def record(parts):
    """A kind-fields record: each part as a u32 LE length and its bytes."""
    return b"".join(struct.pack("<I", len(p)) + p for p in parts)


def pack(tmp_path, name, schema_lines, records):
    sch = tmp_path / f"{name}.schema"
    sch.write_text("\n".join(schema_lines) + "\n")
    recs = tmp_path / f"{name}.records"
    recs.write_bytes(b"".join(struct.pack("<I", len(r)) + r for r in records))
    out = tmp_path / name
    subprocess.run([tool(), "pack", str(out), str(sch), str(recs)], check=True)
    return str(out)


def rfpx(w, h, channels, pixels, u16=False):
    return (b"RFPX" + bytes([1, channels, 2 if u16 else 0, 0]) + struct.pack("<II", w, h) +
            pixels)


def parse_ring(blob):
    h = blob[:RING_HDR]
    (version,) = struct.unpack_from("<I", h, 8)
    depth, batch, stride, meta, sample_bytes = struct.unpack_from("<IIQQQ", h, 24)
    dtype, layout = struct.unpack_from("<II", h, 56)
    shape = struct.unpack_from("<3I", h, 64)
    nfields, primary = struct.unpack_from("<II", h, 120)
    fields = []
    for i in range(nfields):
        at = FIELDS_AT + 128 * i
        name = h[at:at + 32].split(b"\0")[0].decode()
        kind, fdt, flay, ndim, s0, s1, s2, s3, role, of = struct.unpack_from("<10I", h, at + 32)
        item, cap, off, offs_at = struct.unpack_from("<4Q", h, at + 72)
        fields.append(dict(name=name, kind=kind, dtype=fdt, layout=flay,
                           shape=(s0, s1, s2, s3)[:ndim], role=role, of=of, item=item,
                           capacity=cap, offset=off, offsets_at=offs_at))
    slots = []
    body = blob[RING_HDR:]
    for k in range(len(body) // stride):
        s = body[k * stride:(k + 1) * stride]
        count, = struct.unpack_from("<I", s, 4)
        seq_g, epoch, seq = struct.unpack_from("<QQQ", s, 8)
        subst, = struct.unpack_from("<I", s, 36)
        dropped, = struct.unpack_from("<I", s, 48)
        samples = [struct.unpack_from("<QiI", s, 64 + 16 * i) for i in range(count)]
        slots.append(dict(raw=s, count=count, g=seq_g, substituted=subst, dropped=dropped,
                          samples=samples))
    return dict(version=version, depth=depth, batch=batch, stride=stride, meta=meta,
                sample_bytes=sample_bytes, dtype=dtype, layout=layout, shape=shape,
                nfields=nfields, primary=primary, fields=fields, slots=slots)


def column(slot, f, count):
    """A FIXED column's items, or a RAGGED column's (offsets, values bytes)."""
    raw = slot["raw"]
    if f["kind"] == FIXED:
        return [raw[f["offset"] + i * f["item"]:f["offset"] + (i + 1) * f["item"]]
                for i in range(count)]
    offs = struct.unpack_from(f"<{count + 1}q", raw, f["offsets_at"])
    return offs, raw[f["offset"]:f["offset"] + offs[-1] * f["item"]]


def read(sock, line, batches, tmp_path, expect=0):
    out = tmp_path / "ring.bin"
    r = subprocess.run([tool(), "read", sock, str(batches), str(out), line],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == expect, (r.returncode, r.stdout, r.stderr)
    if expect:
        return r.stdout
    return parse_ring(out.read_bytes())


def read_held(d, line, batches, tmp_path, stat_key, want):
    """read, then STATS while the client is still attached: (ring, stats).
    The daemon goes on filling the ring (depth=2: two batches past those
    read): want(ring) is stat_key's value once it has."""
    out = tmp_path / "ring.bin"
    p = subprocess.Popen([tool(), "read", d.sock, str(batches), str(out), line],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, FIELDS_TOOL_HOLD="1"))
    try:
        assert p.stdout.readline().strip() == "held"
        ring = parse_ring(out.read_bytes())
        expect = want(ring)

        def value():
            st = d.stats()
            vals = [int(v) for k, v in st.items()
                    if k.startswith("clients.") and k.endswith(stat_key)]
            return vals == [expect] and st

        st = wait_for(value, f"STATS {stat_key} {expect}", timeout=20)
    finally:
        p.stdin.close()
        assert p.wait(60) == 0
    return ring, st


def check_ragged(f, slot, rows_of):
    """offsets from 0, monotone, ending at the rows; values = the sources'."""
    count = slot["count"]
    offs, vals = column(slot, f, count)
    assert offs[0] == 0
    assert all(a <= b for a, b in zip(offs, offs[1:]))
    want = b"".join(rows_of(idx) for idx, _, _ in slot["samples"])
    assert offs[-1] * f["item"] == len(want) == len(vals)
    assert vals == want
    for i, (idx, _, _) in enumerate(slot["samples"]):
        assert (offs[i + 1] - offs[i]) * f["item"] == len(rows_of(idx))
    # the offsets past the count repeat the last
    full = struct.unpack_from(f"<{slot['batch'] + 1}q", slot["raw"], f["offsets_at"])
    assert all(o == offs[-1] for o in full[count:])


@pytest.fixture
def tok_data(tmp_path):
    rng = random.Random(23)
    samples = []
    for i in range(40):
        emb = np.array([i, -i / 2, i * 0.25], dtype=np.float32).tobytes()
        toks = np.array([rng.randrange(-1000, 1000) for _ in range(rng.randrange(0, 7))],
                        dtype=np.int32).tobytes()
        cap = ("sample %d" % i + "!" * rng.randrange(0, 10)).encode()
        label = i * 3 if i != 7 else 1 << 40  # 1 << 40 does not fit ring_sample.label
        score = i / 7.0
        samples.append(dict(emb=emb, tokens=toks, caption=cap, label=label, score=score))
    records = [record([s["emb"], s["tokens"], s["caption"], struct.pack("<q", s["label"]),
                       struct.pack("<d", s["score"])]) for s in samples]
    schema = ["emb tensor dtype=f32 shape=3", "tokens ragged dtype=i32 max=6",
              "caption bytes max=24", "label scalar dtype=i64", "score scalar dtype=f64"]
    return pack(tmp_path, "tok", schema, records), samples


def test_fields_raw_columns(daemon_factory, tok_data, tmp_path):
    path, samples = tok_data
    d = daemon_factory({"tok": path}, workers=2)
    # one epoch of 5 batches read, and batches 0 and 1 of the next made
    # (shuffle=0: the same samples)
    def rows(ring):
        per = [sum(len(samples[idx]["tokens"]) // 4 for idx, _, _ in sl["samples"])
               for sl in ring["slots"]]
        return sum(per) + per[0] + per[1]

    ring, st = read_held(d, "ATTACH dataset=tok batch=8 shuffle=0 depth=2 version=3", 5,
                         tmp_path, ".fields.tokens.rows", rows)
    assert ring["version"] == 3 and ring["nfields"] == 5
    names = [f["name"] for f in ring["fields"]]
    assert names == ["emb", "tokens", "caption", "label", "score"]
    f = {x["name"]: x for x in ring["fields"]}
    assert ring["primary"] == 0 and f["emb"]["kind"] == FIXED and f["emb"]["item"] == 12
    assert f["emb"]["offset"] == ring["meta"]
    assert f["tokens"]["kind"] == RAGGED and f["tokens"]["dtype"] == 4
    assert f["tokens"]["capacity"] == 8 * 6 and f["tokens"]["item"] == 4
    assert f["caption"]["kind"] == RAGGED and f["caption"]["dtype"] == 1
    assert f["label"]["dtype"] == 7 and f["score"]["dtype"] == 6
    seen = []
    for slot in ring["slots"]:
        slot["batch"] = ring["batch"]
        n = slot["count"]
        emb = column(slot, f["emb"], n)
        lab = column(slot, f["label"], n)
        sco = column(slot, f["score"], n)
        for i, (idx, label32, flags) in enumerate(slot["samples"]):
            s = samples[idx]
            seen.append(idx)
            assert emb[i] == s["emb"]
            assert struct.unpack("<q", lab[i])[0] == s["label"]
            assert struct.unpack("<d", sco[i])[0] == s["score"]
            assert label32 == (s["label"] if s["label"] < 2 ** 31 else -1)
        check_ragged(f["tokens"], slot, lambda idx: samples[idx]["tokens"])
        check_ragged(f["caption"], slot, lambda idx: samples[idx]["caption"])
    assert sorted(seen) == list(range(40))


def test_fields_refusals(daemon_factory, tok_data, tmp_path):
    path, _ = tok_data
    d = daemon_factory({"tok": path}, workers=1)
    out = read(d.sock, "ATTACH dataset=tok batch=8 version=2", 1, tmp_path, expect=2)
    assert out.startswith("ERR") and "version 3" in out and "upgrade" in out, out
    out = read(d.sock, "ATTACH dataset=tok batch=8 field=emb", 1, tmp_path, expect=2)
    assert "transform raw" in out and "field=" in out, out
    out = read(d.sock, "ATTACH dataset=tok batch=8 transform=eval", 1, tmp_path, expect=2)
    assert "image field" in out and "emb (tensor)" in out, out
    # a ragged stream is made by one worker per batch: at most 1024
    out = read(d.sock, "ATTACH dataset=tok batch=2048 version=3", 1, tmp_path, expect=2)
    assert "batch=2048" in out and "1024" in out, out


def test_fields_capacity_overflow_fails_stream(daemon_factory, tmp_path):
    toks = np.arange(6, dtype=np.int32).tobytes()
    records = [record([struct.pack("<q", i), toks]) for i in range(16)]
    path = pack(tmp_path, "tight", ["label scalar dtype=i64",
                                    "tokens ragged dtype=i32 max=6 cap=8"], records)
    d = daemon_factory({"tight": path}, workers=1)
    out = read(d.sock, "ATTACH dataset=tight batch=4 shuffle=0 version=3", 2, tmp_path,
               expect=3)
    assert out.startswith("failed:") and "tokens" in out and "8 rows" in out, out
    assert "12+ rows" in out or "rows" in out, out


@pytest.fixture
def img_data(tmp_path):
    rng = random.Random(5)
    w, h = 5, 6
    samples = []
    for i in range(12):
        pix = bytes(rng.randrange(256) for _ in range(w * h * 3))
        mask = bytes(rng.randrange(4) for _ in range(w * h))
        boxes = np.array([[0.5, 1.0, 3.0, 4.5], [1, 1, 2, 2], [10, 0, 12, 2]][:1 + i % 3],
                         dtype=np.float32)
        samples.append(dict(pix=pix, mask=mask, boxes=boxes, label=i))
    records = [record([rfpx(w, h, 3, s["pix"]), rfpx(w, h, 1, s["mask"]),
                       s["boxes"].tobytes(), struct.pack("<q", s["label"])]) for s in samples]
    schema = ["image image shape=6x5", "mask image channels=1 mask=image",
              "boxes ragged dtype=f32 shape=4 max=3 boxes=image", "label scalar dtype=i64"]
    return pack(tmp_path, "img", schema, records), samples, (w, h)


def test_fields_image_mask_boxes_none(daemon_factory, img_data, tmp_path):
    path, samples, (w, h) = img_data
    d = daemon_factory({"img": path}, workers=2)
    ring, st = read_held(d, "ATTACH dataset=img batch=4 shuffle=0 depth=2 transform=none "
                         "version=3", 3, tmp_path, ".boxes_dropped",
                         lambda r: sum(sl["dropped"] for sl in r["slots"]) +
                         r["slots"][0]["dropped"] + r["slots"][1]["dropped"])
    f = {x["name"]: x for x in ring["fields"]}
    assert ring["primary"] == 0 and f["image"]["shape"] == (3, h, w)
    assert f["mask"]["shape"] == (1, h, w) and f["mask"]["role"] == 2 and f["mask"]["of"] == 0
    assert f["boxes"]["role"] == 1 and f["boxes"]["shape"] == (4,)
    dropped = 0
    for slot in ring["slots"]:
        slot["batch"] = ring["batch"]
        n = slot["count"]
        imgs = column(slot, f["image"], n)
        masks = column(slot, f["mask"], n)
        offs, vals = column(slot, f["boxes"], n)
        got = np.frombuffer(vals, dtype=np.float32).reshape(-1, 4)
        want_drop = 0
        for i, (idx, label32, _) in enumerate(slot["samples"]):
            s = samples[idx]
            chw = np.frombuffer(s["pix"], np.uint8).reshape(h, w, 3).transpose(2, 0, 1)
            assert imgs[i] == chw.tobytes()
            assert masks[i] == s["mask"]
            assert label32 == s["label"]
            # none: the whole image, no flip; a box whose centre is outside drops
            keep = [b for b in s["boxes"] if (b[0] + b[2]) / 2 < w and (b[1] + b[3]) / 2 < h]
            want_drop += len(s["boxes"]) - len(keep)
            np.testing.assert_array_equal(got[offs[i]:offs[i + 1]],
                                          np.array(keep, np.float32).reshape(-1, 4))
        assert slot["dropped"] == want_drop
        dropped += want_drop
    assert dropped > 0
    assert int(st["total.boxes_dropped"]) == int(
        [v for k, v in st.items() if k.endswith(".boxes_dropped") and k.startswith("clients.")][0])


def test_fields_bind_refusals(daemon_factory, img_data, tmp_path):
    path, _, _ = img_data
    d = daemon_factory({"img": path}, workers=1)
    out = read(d.sock, "ATTACH dataset=img transform=none field=nope", 1, tmp_path, expect=2)
    assert "field=nope" in out and "image (image)" in out and "boxes (ragged)" in out, out
    out = read(d.sock, "ATTACH dataset=img transform=none field=label", 1, tmp_path, expect=2)
    assert "scalar" in out, out
    out = read(d.sock, "ATTACH dataset=img transform=none field=mask", 1, tmp_path, expect=2)
    assert "mask of image" in out, out
    out = read(d.sock, "ATTACH dataset=img transform=raw", 1, tmp_path, expect=2)
    assert "image field image" in out, out
    ring = read(d.sock, "ATTACH dataset=img transform=none field=image batch=4", 1, tmp_path)
    assert ring["primary"] == 0


@pytest.fixture(scope="module")
def fm_packed(tmp_path_factory):
    dest = tmp_path_factory.mktemp("fm") / "test"
    subprocess.run([binary("tools/ringfeed-pack"), "idx",
                    "--images", f"{FMNIST}/t10k-images-idx3-ubyte.gz",
                    "--labels", f"{FMNIST}/t10k-labels-idx1-ubyte.gz", str(dest)],
                   check=True, stdout=subprocess.DEVNULL)
    return str(dest)


def test_legacy_v3_label_column_and_v2_unchanged(daemon_factory, fm_packed, tmp_path):
    _, size, pixels = idx_images(f"{FMNIST}/t10k-images-idx3-ubyte.gz")
    labels = idx_labels(f"{FMNIST}/t10k-labels-idx1-ubyte.gz")
    d = daemon_factory({"fm": fm_packed}, workers=2)
    v3 = read(d.sock, "ATTACH dataset=fm batch=16 seed=3 version=3", 3, tmp_path)
    assert v3["version"] == 3 and v3["nfields"] == 2 and v3["primary"] == 0
    f0, f1 = v3["fields"]
    assert f0["offset"] == v3["meta"] and f0["item"] == 784
    assert f1["name"] == "label" and f1["dtype"] == 7 and f1["item"] == 8
    v2 = read(d.sock, "ATTACH dataset=fm batch=16 seed=3 version=2", 3, tmp_path)
    assert v2["version"] == 2 and v2["nfields"] == 0 and v2["sample_bytes"] == 784
    for s3, s2 in zip(v3["slots"], v2["slots"]):
        n = s3["count"]
        assert s3["samples"] == s2["samples"]
        pix3 = s3["raw"][v3["meta"]:v3["meta"] + n * 784]
        pix2 = s2["raw"][v2["meta"]:v2["meta"] + n * 784]
        assert pix3 == pix2
        labs = column(s3, f1, n)
        for i, (idx, label32, _) in enumerate(s3["samples"]):
            assert struct.unpack("<q", labs[i])[0] == labels[idx] == label32
            assert pix3[i * 784:(i + 1) * 784] == pixels[idx * size:(idx + 1) * size]


def test_fields_substitute_replaces_every_field(daemon_factory, tmp_path):
    """A record that fails its checksum is replaced by the next good sample
    in the epoch's order, every field of it: tensor, scalars, ragged rows."""
    samples = []
    for i in range(12):
        samples.append(dict(emb=np.full(3, i, np.float32).tobytes(),
                            tokens=np.arange(i % 4, dtype=np.int32).tobytes() + b"",
                            caption=b"cap%02d" % i + (b"DAMAGE" if i == 5 else b""),
                            label=100 + i))
    records = [record([s["emb"], s["tokens"], s["caption"], struct.pack("<q", s["label"])])
               for s in samples]
    path = pack(tmp_path, "dmg", ["emb tensor dtype=f32 shape=3", "tokens ragged dtype=i32 max=4",
                                  "caption bytes max=16", "label scalar dtype=i64"], records)
    shard = [f for f in os.listdir(path) if f.endswith(".rfs")]
    assert shard, os.listdir(path)
    fpath = os.path.join(path, sorted(shard)[0])
    data = bytearray(open(fpath, "rb").read())
    at = data.find(b"DAMAGE")
    assert at > 0
    data[at] ^= 0xFF  # codec none: the record's bytes as they are; its CRC now fails
    open(fpath, "wb").write(bytes(data))
    d = daemon_factory({"dmg": path}, workers=1)
    ring = read(d.sock, "ATTACH dataset=dmg batch=4 shuffle=0 version=3", 3, tmp_path)
    f = {x["name"]: x for x in ring["fields"]}
    subst = 0
    for slot in ring["slots"]:
        slot["batch"] = ring["batch"]
        n = slot["count"]
        emb, lab = column(slot, f["emb"], n), column(slot, f["label"], n)
        for i, (idx, label32, flags) in enumerate(slot["samples"]):
            s = samples[idx]
            assert emb[i] == s["emb"] and struct.unpack("<q", lab[i])[0] == s["label"]
            assert label32 == s["label"]
            if flags & 2:
                subst += 1
                assert idx == 6, idx  # sample 5's place, the next good one
        check_ragged(f["tokens"], slot, lambda idx: samples[idx]["tokens"])
        check_ragged(f["caption"], slot, lambda idx: samples[idx]["caption"])
    assert subst == 1
    assert ring["slots"][1]["substituted"] == 1


def test_fields_share_group(daemon_factory, tok_data, tmp_path):
    """Two clients of the same kind-fields stream share its batches (decode
    once, the worker copying each batch from its own memory into both
    rings): both get every column as the source has it."""
    path, samples = tok_data
    d = daemon_factory({"tok": path}, workers=1)
    line = "ATTACH dataset=tok batch=8 shuffle=0 depth=2 version=3"
    outs = [tmp_path / "a.bin", tmp_path / "b.bin"]
    joins = int(d.stats()["sharing.joins"])
    with workers_held(d):
        procs = [subprocess.Popen([tool(), "read", d.sock, "10", str(outs[0]), line])]
        wait_for(lambda: d.stats()["clients.attached"] == "1", "the first client")
        procs.append(subprocess.Popen([tool(), "read", d.sock, "10", str(outs[1]), line]))
        wait_for(lambda: int(d.stats()["sharing.joins"]) > joins, "the second to join")
    assert [p.wait(60) for p in procs] == [0, 0]
    assert int(d.stats()["sharing.batches"]) > 0
    for out in outs:
        ring = parse_ring(out.read_bytes())
        f = {x["name"]: x for x in ring["fields"]}
        for slot in ring["slots"]:
            slot["batch"] = ring["batch"]
            emb = column(slot, f["emb"], slot["count"])
            for i, (idx, _, _) in enumerate(slot["samples"]):
                assert emb[i] == samples[idx]["emb"]
            check_ragged(f["tokens"], slot, lambda idx: samples[idx]["tokens"])
            check_ragged(f["caption"], slot, lambda idx: samples[idx]["caption"])


def test_fields_train_mask_boxes_match_targets_run(daemon_factory, tmp_path):
    """transform=train on a kind-fields dataset: each sample's mask and
    boxes in the ring are what tests/targets_run gives for the same image,
    seed and index (the workers' transform, then targets.c through its
    view): the daemon wires the view of the bound image to its mask and
    boxes, flips included."""
    rng = random.Random(11)
    w, h, size, seed = 20, 16, 8, 77
    samples = []
    for i in range(16):
        pix = bytes(rng.randrange(256) for _ in range(w * h * 3))
        mask = bytes(rng.randrange(5) for _ in range(w * h))
        boxes = np.array([[rng.uniform(0, w / 2), rng.uniform(0, h / 2),
                           rng.uniform(w / 2, w), rng.uniform(h / 2, h)] for _ in range(3)],
                         dtype=np.float32)
        samples.append(dict(img=rfpx(w, h, 3, pix), mask=rfpx(w, h, 1, mask), boxes=boxes))
    records = [record([s["img"], s["mask"], s["boxes"].tobytes()]) for s in samples]
    path = pack(tmp_path, "seg", ["image image", "mask image channels=1 mask=image",
                                  "boxes ragged dtype=f32 shape=4 max=3 boxes=image"], records)
    d = daemon_factory({"seg": path}, workers=2)
    ring = read(d.sock, f"ATTACH dataset=seg batch=4 seed={seed} transform=train size={size} "
                "version=3", 4, tmp_path)
    f = {x["name"]: x for x in ring["fields"]}
    assert f["mask"]["shape"] == (1, size, size)
    runs = dropped = 0
    flips = set()
    for slot in ring["slots"]:
        slot["batch"] = ring["batch"]
        n = slot["count"]
        masks = column(slot, f["mask"], n)
        offs, vals = column(slot, f["boxes"], n)
        got = np.frombuffer(vals, dtype=np.float32).reshape(-1, 4)
        for i, (idx, _, _) in enumerate(slot["samples"]):
            s = samples[idx]
            files = {}
            for k in ("img", "mask"):
                files[k] = tmp_path / f"{k}.bin"
                files[k].write_bytes(s[k])
            files["boxes"] = tmp_path / "boxes.bin"
            files["boxes"].write_bytes(s["boxes"].tobytes())
            out = tmp_path / "mask.out"
            out.write_bytes(b"")
            r = subprocess.run([binary("tests/targets_run"), "train", str(size), str(seed),
                                str(idx), "1", str(files["img"]), str(files["mask"]),
                                str(files["boxes"]), str(out)],
                               capture_output=True, text=True, check=True)
            line = [x for x in r.stdout.splitlines() if x.startswith("boxes")][0].split()
            kept = int(line[1])
            want = np.array([float(v) for v in line[2:]], dtype=np.float32).reshape(kept, 4)
            np.testing.assert_array_equal(got[offs[i]:offs[i + 1]], want)
            assert masks[i] == out.read_bytes(), f"sample {idx}'s mask"
            runs += 1
            flips.add(r.stdout.split()[6])
        dropped += slot["dropped"]
    # the seed gives crops that drop boxes, and both flips (deterministic)
    assert runs == 16 and dropped > 0 and flips == {"0", "1"}, (runs, dropped, flips)


def test_fields_tampered_table_is_never_read(daemon_factory, tok_data, tmp_path):
    """A client that rewrites its ring's field table before the workers map
    it (tokens and caption swapped: as many pages each, so the table stays
    self-consistent and ring_check passes it) garbles only its own view:
    the workers build the table from their own schema and check it against
    the main process's figures (ring.h T3), never reading the header, so
    every slot holds the same bytes a client that left its header alone
    gets.  (Workers used to compare with the shared header and refuse the
    ring, which failed the stream of a client whose header was rewritten
    before a worker started later first mapped it.)"""
    path, _ = tok_data
    d = daemon_factory({"tok": path}, workers=1)
    line = "ATTACH dataset=tok batch=8 shuffle=0 version=3 share=0"
    out = tmp_path / "t.bin"
    with workers_held(d):
        p = subprocess.Popen([tool(), "read", d.sock, "2", str(out), line],
                             stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, FIELDS_TOOL_TAMPER="1"))
        assert p.stdout.readline().strip() == "tampered consistent"
    rest = p.stdout.read()
    assert p.wait(60) == 0, rest
    clean = tmp_path / "ring.bin"
    read(d.sock, line, 2, tmp_path)
    tampered, good = out.read_bytes(), clean.read_bytes()
    assert len(tampered) == len(good) > RING_HDR
    assert tampered[:RING_HDR] != good[:RING_HDR], "the tool did not rewrite the table"
    assert tampered[RING_HDR:] == good[RING_HDR:], "a worker wrote by the client's table"
    assert "does not match" not in d.read_log(), d.read_log()[-2000:]
