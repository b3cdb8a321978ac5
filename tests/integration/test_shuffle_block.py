"""test_shuffle_block.py - shuffle=block (proto/sampler.c, THE BLOCK ORDER)
through ringfeed.Loader against a real daemon serving Fashion-MNIST's test
set packed into several shards.

  - over 2 ranks an epoch delivers every sample exactly once, each rank's
    batches touching few blocks (the locality bound for a window of
    batch * world positions), another order than the global shuffle's and
    another in the next epoch;
  - the default block is 4 of the pack's largest shard (STATS shows the
    shuffle and the block), and an explicit shuffle_block reaches STATS;
  - resume: state_dict() mid-epoch, then a new loader continues with
    exactly the batches an uninterrupted loader gives;
  - bad arguments are refused, naming them.
"""
import math
import subprocess

import pytest

import ringfeed
from conftest import FMNIST, pack_tool, read_dump, run_read

N = 10000  # Fashion-MNIST's test set
BATCH = 50
WORLD = 2


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    """The test set packed in shards of about 400 KB (several shards)."""
    dest = tmp_path_factory.mktemp("block") / "fm"
    subprocess.run([pack_tool(), "idx", "--images", f"{FMNIST}/t10k-images-idx3-ubyte.gz",
                    "--labels", f"{FMNIST}/t10k-labels-idx1-ubyte.gz", "--shard-size", "400K",
                    str(dest)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return str(dest)


def largest_shard(pack):
    """The records of the pack's largest shard, from its MANIFEST."""
    with open(f"{pack}/MANIFEST") as f:
        counts = [int(line.split()[3]) for line in f if line.startswith("shard ")]
    assert len(counts) >= 3, counts
    return max(counts)


def client_stats(d, name):
    st = d.stats()
    for k, v in st.items():
        if k.startswith("clients.") and k.endswith(".name") and v == name:
            cid = k.split(".")[1]
            return {k.split(".", 2)[2]: v for k, v in st.items()
                    if k.startswith(f"clients.{cid}.")}
    raise AssertionError(f"no client named {name} in STATS")


def epoch_batches(loader):
    return [[int(i) for i in loader.last.indices] for _ in loader]


def test_every_sample_once_across_ranks_with_locality(pack, daemon_factory):
    d = daemon_factory({"fm": pack}, workers=2)
    block = 700
    kw = dict(socket=d.sock, seed=4, output="numpy", shuffle="block", shuffle_block=block,
              world_size=WORLD)
    ranks = [ringfeed.Loader("fm", BATCH, rank=r, name=f"b{r}", **kw) for r in range(WORLD)]
    st = client_stats(d, "b0")
    assert st["shuffle"] == f"block:{block}", st
    per_rank = [epoch_batches(loader) for loader in ranks]
    got = sorted(i for batches in per_rank for b in batches for i in b)
    assert got == list(range(N)), "an epoch over 2 ranks is not every sample once"
    # batch seq of every rank lies in positions [seq * B * W, (seq + 1) * B * W)
    blocks = N // block
    bound = math.ceil(BATCH * WORLD / block) + 1
    for seq in range(len(per_rank[0])):
        touched = {min(i // block, blocks - 1) for r in range(WORLD) for i in per_rank[r][seq]}
        assert len(touched) <= bound, (seq, sorted(touched))
    # another epoch, another order; the global shuffle another still
    nxt = epoch_batches(ranks[0])
    assert ranks[0].last.epoch == 1 and nxt != per_rank[0]
    glob = ringfeed.Loader("fm", BATCH, rank=0, socket=d.sock, seed=4, output="numpy",
                           world_size=WORLD)
    assert epoch_batches(glob) != per_rank[0]
    for loader in ranks + [glob]:
        loader.close()


def test_default_block_is_four_shards(pack, daemon_factory):
    d = daemon_factory({"fm": pack}, workers=2)
    loader = ringfeed.Loader("fm", BATCH, socket=d.sock, output="numpy", shuffle="block",
                             name="dflt")
    st = client_stats(d, "dflt")
    assert st["shuffle"] == f"block:{4 * largest_shard(pack)}", st
    assert sorted(i for b in epoch_batches(loader) for i in b) == list(range(N))
    loader.close()
    plain = ringfeed.Loader("fm", BATCH, socket=d.sock, output="numpy", name="plain")
    st = client_stats(d, "plain")
    assert st["shuffle"] == "1", st
    plain.close()


def test_resume_exactly(pack, daemon_factory):
    d = daemon_factory({"fm": pack}, workers=2)
    kw = dict(socket=d.sock, seed=9, output="numpy", shuffle="block", shuffle_block=1200,
              rank=1, world_size=WORLD)
    whole = ringfeed.Loader("fm", BATCH, **kw)
    want = epoch_batches(whole) + epoch_batches(whole)
    whole.close()
    first = ringfeed.Loader("fm", BATCH, **kw)
    it = iter(first)
    got = []
    for _ in range(130):   # one epoch is 100 batches for this rank: stop inside epoch 1
        try:
            next(it)
        except StopIteration:
            it = iter(first)
            next(it)
        got.append([int(i) for i in first.last.indices])
    state = first.state_dict()
    assert (state["epoch"], state["shuffle"], state["shuffle_block"]) == (1, "block", 1200)
    first.close()
    second = ringfeed.Loader("fm", BATCH, **kw)
    second.load_state_dict(state)
    got += epoch_batches(second)
    assert got == want, "the resumed loader's batches differ from an uninterrupted one's"
    other = ringfeed.Loader("fm", BATCH, **dict(kw, shuffle_block=1300))
    with pytest.raises(ValueError, match="shuffle_block"):
        other.load_state_dict(state)
    other.close()
    second.close()


def test_bad_arguments(pack, daemon_factory):
    d = daemon_factory({"fm": pack}, workers=1)
    for kw, err, want in ((dict(shuffle="blocks"), ringfeed.Error, '"block"'),
                          (dict(shuffle_block=100), ringfeed.Error, "shuffle_block"),
                          (dict(shuffle="block", shuffle_block=0), OverflowError,
                           "shuffle_block"),
                          (dict(shuffle="block", shuffle_block=100, params="block=5"), ringfeed.Error,
                           "block given twice")):
        with pytest.raises(err, match=want):
            ringfeed.Loader("fm", BATCH, socket=d.sock, **kw)
    assert int(d.stats()["workers.alive"]) >= 1


def test_read_tool_shuffle_block(pack, daemon_factory, tmp_path):
    """ringfeed-read --shuffle block reads the order ringfeed.Loader(shuffle=
    "block") reads (same seed); --shuffle 1 another; a bad value is refused."""
    d = daemon_factory({"fm": pack}, workers=1)
    loader = ringfeed.Loader("fm", BATCH, socket=d.sock, seed=3, output="numpy", shuffle="block")
    want = [i for b in epoch_batches(loader) for i in b]
    loader.close()
    got = {}
    for value in ("block", "1"):
        dump = tmp_path / f"dump-{value}"
        run_read(d.sock, "fm", batch=BATCH, extra=("--seed", "3", "--shuffle", value),
                 dump=str(dump))
        got[value] = [i for _, _, i in read_dump(str(dump))]
    assert got["block"] == want
    assert got["1"] != want and sorted(got["1"]) == list(range(N))
    _, r = run_read(d.sock, "fm", batch=BATCH, extra=("--shuffle", "blocks"), check=False)
    assert r.returncode == 2 and '--shuffle "blocks": give 0, 1 or block' in r.stderr, r.stderr
