/*
 * wds.h - WebDataset's rules as pure functions of their inputs, for
 * `ringfeed-pack webdataset` (pack_webdataset.c) and its fuzz target: a
 * member's path split into key and extension, an extension's field name
 * and kind, the grouping of consecutive members into samples, a sample's
 * members matched to the field list, and the integer of a .cls member.
 *
 * WebDataset's naming rule: the key is the member's path up to the first
 * '.' of its basename, the extension everything after that dot (so
 * `dir/abc.seg.png` is key `dir/abc`, extension `seg.png`).  A basename
 * without a dot, or with nothing before its first dot (`.hidden`), names
 * no sample (WebDataset skips such members).  Extensions are compared
 * lower-cased (WebDataset's default).
 *
 * Grouping (struct wds_group): consecutive members with one key form a
 * sample.  Within one tar a key must not come back once another key came
 * between (the sample would be split in two), and one sample must not
 * hold an extension twice; either makes the sample bad (its first fault
 * and the member that caused it are kept) without stopping the grouping.
 * Keys are checked per tar: a new tar starts afresh (wds_group_reset).
 */
#ifndef RINGFEED_TOOLS_WDS_H
#define RINGFEED_TOOLS_WDS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "schema.h"

#define WDS_EXT_MAX 63          /* bytes of an extension */
#define WDS_MEMBERS_MAX 64      /* members of one sample */

/* A member's path split: key = path[0, key_len), ext = path[ext_off, n). */
struct wds_name {
    size_t key_len;
    size_t ext_off;
    size_t ext_len;
};

/*
 * Splits the n bytes of path by the rule above.  Returns 0, -ENOENT (no
 * extension: not a sample's member), or -ENAMETOOLONG (an extension over
 * WDS_EXT_MAX bytes).
 */
int wds_name_split(const char *path, size_t n, struct wds_name *out);

/* What an extension's field holds, by its last dot-separated part. */
enum wds_kind {
    WDS_IMAGE,    /* jpg jpeg png webp ppm pgm bmp tif tiff: an image */
    WDS_INT,      /* cls cls2 index label: an ASCII decimal -> int64 scalar */
    WDS_TEXT,     /* txt: UTF-8 text -> bytes */
    WDS_JSON,     /* json: bytes, not parsed */
    WDS_NPY,      /* npy: a tensor (or ragged, see pack_webdataset.c) */
    WDS_BYTES,    /* anything else: bytes as they are */
    WDS_KIND_COUNT
};

/* The kind of the ext_len bytes at ext (any case); never fails. */
enum wds_kind wds_ext_kind(const char *ext, size_t ext_len);
/* "image", "integer", ...; NULL out of range. */
const char *wds_kind_name(enum wds_kind k);

/*
 * The field name of an extension: lower-cased, each byte outside
 * [a-z0-9_] made '_', and '_' put first when it starts with a digit
 * (`seg.png` -> `seg_png`, `0.jpg` -> `_0_jpg`), into out
 * (SCHEMA_NAME_MAX + 1 bytes).  Returns 0, or -ENAMETOOLONG (over
 * SCHEMA_NAME_MAX), -EINVAL (empty).
 */
int wds_field_name(const char *ext, size_t ext_len, char *out);

/* Why a sample is bad. */
enum wds_fault {
    WDS_OK,
    WDS_DUP_EXT,       /* an extension twice in one sample */
    WDS_KEY_AGAIN,     /* the key came earlier in this tar, apart */
    WDS_TOO_MANY,      /* over WDS_MEMBERS_MAX members */
};

const char *wds_fault_text(enum wds_fault f);

/* The grouping state; owns the current key and the set of keys seen. */
struct wds_group {
    char *key;                  /* the current sample's key */
    size_t key_len, key_cap;
    int open;                   /* a sample is open */
    uint32_t members;           /* members of the current sample */
    char ext[WDS_MEMBERS_MAX][WDS_EXT_MAX + 1];   /* theirs, lower-cased */
    enum wds_fault fault;       /* the current sample's first fault */
    uint32_t fault_member;      /* and the member that caused it */
    /* keys of this tar's earlier samples: an open-addressing set of
     * 64-bit hashes, with the keys to compare on a hash match */
    uint64_t *hash;
    char **keys;
    size_t nkeys, slots;
};

void wds_group_init(struct wds_group *g);
/* Forgets the open sample and the keys seen (a new tar). */
void wds_group_reset(struct wds_group *g);
void wds_group_fini(struct wds_group *g);

/* 1 when a member of key (klen bytes) starts a new sample: the open one,
 * if any, is complete (the caller finishes it before wds_group_next). */
int wds_group_is_new(const struct wds_group *g, const char *key, size_t klen);

/*
 * Takes the next member (key of klen bytes, extension of elen bytes <=
 * WDS_EXT_MAX).  Returns 1 when it starts a new sample (wds_group_is_new),
 * 0 when it joins the open sample, -ENOMEM.  A fault goes into g->fault for
 * the sample it joins.  After it, g->members - 1 is its member index.
 */
int wds_group_next(struct wds_group *g, const char *key, size_t klen, const char *ext,
                   size_t elen);

/* The field list: extensions (lower-cased), in the dataset's order. */
struct wds_fields {
    uint32_t n;
    int selected;               /* from --fields: other extensions dropped */
    char ext[SCHEMA_MAX_FIELDS][WDS_EXT_MAX + 1];
};

/*
 * Parses --fields' comma-separated extensions (a leading '.' allowed)
 * into f (selected).  Returns 0 or -EINVAL with err naming the entry
 * (empty, too long, named twice, over SCHEMA_MAX_FIELDS, or two whose
 * field names are alike).
 */
int wds_fields_parse(const char *list, struct wds_fields *f, struct rf_err *err);

/*
 * The field list of a first sample whose n extensions are exts (in member
 * order; a grouped sample has no duplicate).  Returns 0, or -EINVAL with
 * err set (over SCHEMA_MAX_FIELDS, field names alike or too long).
 */
int wds_fields_from(struct wds_fields *f, char exts[][WDS_EXT_MAX + 1], uint32_t n,
                    struct rf_err *err);

/*
 * Maps a sample's n members (their extensions) to fields: field_of[m] is
 * member m's field, or -1 for a member that --fields leaves out.  Returns
 * 0; -ENOENT with *which the field that no member gives; -EINVAL with
 * *which the member whose extension is no field (no --fields).
 */
int wds_fields_map(const struct wds_fields *f, char exts[][WDS_EXT_MAX + 1], uint32_t n,
                   int32_t *field_of, uint32_t *which);

/*
 * Reads a .cls member: ASCII decimal, optionally signed, with blanks
 * (space, tab, CR, LF) around it, within int64.  Returns 0, or -EINVAL
 * with err saying what is wrong at which byte.
 */
int wds_parse_int(const uint8_t *p, size_t n, int64_t *out, struct rf_err *err);

#endif
