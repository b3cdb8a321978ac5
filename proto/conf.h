/*
 * conf.h - ringfeedd's configuration: the file format, its parser (a pure
 * function over a buffer), and the rule that command-line flags override
 * the file.
 *
 * THE FILE (by default /etc/ringfeed/ringfeedd.conf; the daemon decides)
 *
 *     # ringfeedd.conf
 *     socket        = /run/ringfeed/ringfeed.sock
 *     dataset.fmnist   = /var/lib/ringfeed/fmnist
 *     dataset.imagenet = /srv/data/imagenet
 *     workers       = 8
 *     cpu-budget    = 8
 *     memory-budget = 16G
 *     log-level     = info
 *     allow-uid     = 1000, 1001
 *     allow-gid     = 2000
 *     watchdog-sec  = 60
 *     max-bad-samples = 1000
 *     pixel-cap     = 67108864
 *     socket-mode   = 0660
 *     socket-group  = ringfeed
 *     max-clients   = 256
 *     max-connections = 1024
 *     idle-sec      = 60
 *     weight        = name:trainer=3, uid:1000=2/8
 *     max-weight    = 1
 *     memory-per-client = 25%
 *     memory-per-uid    = 8G
 *     recipe.cifar  = RandomCrop:size=32:padding=4,RandomHorizontalFlip
 *     plugin.sepia  = /usr/lib/ringfeed/plugins/sepia.so
 *     name          = gpu0
 *     cpu-list      = 0-15,32-47
 *     numa-node     = 0
 *     dataset.web   = https://data.example.org/packs/imagenet/
 *     dataset.lake  = s3://training-data/imagenet/
 *     cache-dir     = /var/cache/ringfeed
 *     cache-size    = 64G
 *     s3-endpoint   = http://127.0.0.1:9000
 *     s3-region     = eu-west-1
 *     fetch-retries = 4
 *     cache-evict   = belady
 *     mixture.blend = fmnist:0.7 imagenet:0.3
 *
 *   - One "key = value" a line; blanks around the key, the '=' and the value
 *     are ignored.  The value is the rest of the line (so a path may hold
 *     spaces and '#').  LF or CRLF line ends; the last line may lack one.
 *   - A line whose first non-blank character is '#' is a comment; blank
 *     lines are ignored.  There are no trailing comments.
 *   - Keys are lower case.  An unknown key, a key given twice and a value
 *     out of range are errors naming the line, the key and what it accepts.
 *   - Lines are at most CONF_LINE_MAX bytes and hold no control character
 *     but TAB (and the CR of a CRLF); NUL bytes are errors.
 *
 * Keys:
 *   socket = PATH          the control socket, absolute, at most 107 bytes
 *                          (sun_path).  Default CONF_DEFAULT_SOCKET.
 *   dataset.NAME = DIR|URL serve the dataset in the absolute folder DIR as
 *                          NAME (1..64 of [A-Za-z0-9._-], what ATTACH names).
 *                          One line per dataset, at most CONF_DATASETS_MAX;
 *                          a NAME given twice is an error.  Clients never
 *                          name paths: the daemon opens only these.  A
 *                          value with "://" is a remote pack's URL,
 *                          http://, https:// or s3:// as proto/url.h
 *                          accepts it (a bad one is an error naming the
 *                          line and the byte); conf_dataset_remote says
 *                          which a value is.
 *   workers = N | auto     worker processes, 1..256, or "auto": the daemon
 *                          sizes the pool itself under cpu-budget
 *                          (daemon/autoscale.c has the rules), starting
 *                          with one worker.  Not set: one per CPU, fixed.
 *   cpu-budget = N         CPUs the worker pool may use, 1..256: with
 *                          workers = auto the pool never has more workers
 *                          alive than this.  Used as given.  Not set: the
 *                          CPUs the daemon may run on (sched_getaffinity),
 *                          lowered to a cgroup v2 cpu.max quota (rounded
 *                          up), less one per attached client, at least 1.
 *   memory-budget = SIZE   bytes the daemon may spend on rings, at least 1M:
 *                          digits with an optional binary suffix K, M, G, T
 *                          (or KiB, MiB, GiB, TiB; any case), e.g. 512M.
 *                          Not set: the daemon picks from the machine's RAM.
 *   log-level = LEVEL      error | warn | info | debug.  Default info.
 *   allow-uid = LIST       comma-separated user ids (0..4294967294, at most
 *   allow-gid = LIST       CONF_ALLOW_MAX, blanks allowed around commas):
 *                          peers (SO_PEERCRED) whose uid, or whose gid, is
 *                          listed may use the socket, besides root and the
 *                          daemon's own user.  Neither set: members of the
 *                          socket file's group (primary or supplementary)
 *                          may, besides root and the daemon's own user.
 *                          Anyone else is answered "ERR denied" and closed.
 *   watchdog-sec = N       seconds a worker may spend on one job before the
 *                          daemon kills it and hands the job to another;
 *                          0..86400, 0 turns the watchdog off.  Default 60.
 *   max-bad-samples = N    bad samples in a row (each replaced by the next
 *                          good one in the epoch's order) before a client's
 *                          stream fails with an error instead of searching
 *                          on; 0 fails on the first.  Default 1000.
 *   pixel-cap = N          the largest image a worker decodes, in pixels
 *                          (width x height), 1..2^32; larger ones count as
 *                          bad samples (a decompression-bomb guard).
 *                          Default 67108864 (8192 x 8192).
 *   socket-mode = MODE     the control socket file's permission bits, in
 *                          octal as chmod takes them (0..0777), applied
 *                          when the daemon creates the socket itself (a
 *                          socket-activated one keeps systemd's
 *                          SocketMode=).  Default 0660.
 *   max-clients = N        clients attached at once, 1..CONF_MAX_CLIENTS_MAX
 *                          (each holds a ring and three descriptors); the
 *                          next ATTACH is answered "ERR too-many".  Default
 *                          256.
 *   max-connections = N    control connections open at once, attached
 *                          clients included, 1..CONF_MAX_CONNECTIONS_MAX;
 *                          the next is answered "ERR too-many" and closed.
 *                          Default 1024.
 *   idle-sec = N           seconds a connection that has not attached may
 *                          stay silent before the daemon closes it (an
 *                          attached client's connection is quiet by design
 *                          and never closed for it); 0..86400, 0 never.
 *                          Default 60.
 *   socket-group = GROUP   the group (a name, or a number 0..4294967294)
 *                          that owns the socket file the daemon creates;
 *                          1..32 of [A-Za-z0-9._-], not starting with '-'.
 *                          Not set: the daemon's own group.
 *   weight = LIST          weights by client: comma-separated rules
 *                          "name:LABEL=W" (clients with name=LABEL) and
 *                          "uid:UID=W" (clients of that user), W in
 *                          1..1000, each optionally "W/MAX" (MAX in
 *                          W..1000), at most CONF_WEIGHTS_MAX rules; a name
 *                          rule comes before a uid rule.  A client's rule
 *                          gives its weight when its ATTACH names none,
 *                          and caps the weight= it may ask for at MAX, else
 *                          at the larger of W and max-weight.  While
 *                          clients wait for workers, each gets worker time
 *                          in proportion to its weight.  Not set: every
 *                          client's weight is 1.
 *   max-weight = N         the most weight a client no weight rule covers
 *                          may have, 1..1000: an ATTACH asking more is
 *                          given N (not refused; STATS shows weight_asked
 *                          beside weight).  Default 1: clients cannot raise
 *                          their own share unless the operator allows it.
 *   recipe.NAME = SPEC     an augmentation pipeline (proto/aug_spec.h's
 *                          grammar, checked here) that a client names as
 *                          ATTACH augment=@NAME; NAME is 1..32 of
 *                          [A-Za-z0-9_-], first a letter.  At most
 *                          CONF_RECIPES_MAX; a NAME given twice is an
 *                          error.  A reload applies to the next ATTACH
 *                          (an attached stream keeps the spec it parsed).
 *   mixture.NAME = MIX     a weighted mixture of datasets of one schema
 *                          (proto/mix.h: "web:0.7 books:0.3", blanks or
 *                          commas between, 2..16 datasets of this config)
 *                          that a client attaches as dataset=NAME; NAME
 *                          is a dataset's name ([A-Za-z0-9._-], 1..64) that
 *                          no dataset.NAME takes.  At most
 *                          CONF_MIXTURES_MAX.  A reload applies to the next
 *                          ATTACH (docs/design/mixtures.md).
 *   plugin.NAME = PATH     a plugin: the shared object at the absolute
 *                          PATH (at most CONF_PATH_MAX - 1 bytes) whose
 *                          descriptor is named NAME (1..32 of
 *                          [A-Za-z0-9_-], first a letter), an op a spec
 *                          names as Plugin:name=NAME.  At most
 *                          CONF_PLUGINS_MAX; a NAME given twice is an
 *                          error.  The daemon loads each at start and
 *                          reload and refuses a file that does not load
 *                          or has another ABI or name (daemon/worker/
 *                          plugin.h); a change restarts the workers.
 *   cpu-list = LIST        the CPUs the daemon and its workers run on:
 *                          comma-separated CPU numbers and ranges A-B in
 *                          0..CONF_CPUS_MAX-1 (as taskset -c takes them).
 *                          Applied with sched_setaffinity to the main
 *                          process (workers inherit it) and, on a reload,
 *                          to every worker; a list with no CPU the daemon
 *                          may use is refused then.  workers auto and the
 *                          default worker count follow it.
 *   numa-node = N          the NUMA node the daemon runs on and takes its
 *                          memory from, 0..CONF_NUMA_NODE_MAX: its CPUs
 *                          (the kernel's nodeN/cpulist; with cpu-list, the
 *                          CPUs in both, and none in both is refused) and
 *                          a preferred memory policy for the main process,
 *                          the workers and every ring made after
 *                          (daemon/affinity.h).  A node that does not
 *                          exist, or has no CPU or no memory, is refused
 *                          at start and by a reload; a change restarts
 *                          the workers.  conf_numa_node() reads it.
 *   name = NAME            this daemon's name among the node's daemons
 *                          (ringfeedd@NAME.service sets it): 1..32 of
 *                          [A-Za-z0-9._-], not starting with '-'.  METRICS
 *                          labels every sample daemon="NAME".  A reload
 *                          applies it to the next METRICS.
 *   cache-dir = PATH       the node's cache folder for remote datasets'
 *                          files (daemon/fetch/cache.h), absolute.
 *                          Default CONF_DEFAULT_CACHE_DIR (the unit's
 *                          CacheDirectory=ringfeed).
 *   cache-size = SIZE      the most bytes that folder may hold, at least
 *                          1M, as memory-budget takes a size.  Default
 *                          CONF_DEFAULT_CACHE_SIZE (64G): a fixed figure an
 *                          operator can reason about, not a share of a file
 *                          system that other tenants also fill.
 *   s3-endpoint = URL      the S3 endpoint, http(s)://HOST[:PORT] with no
 *                          path (MinIO, Ceph, a local test server); not
 *                          set: the environment's, else AWS's own
 *                          (daemon/fetch/s3.h has the order).
 *   s3-region = REGION     the S3 region, 1..CONF_S3_REGION_MAX of
 *                          [a-z0-9-]; not set: the environment's, the
 *                          AWS config file's, else us-east-1.
 *   fetch-retries = N      tries after the first for one remote object,
 *                          0..CONF_FETCH_RETRIES_MAX (daemon/fetch/fetch.h
 *                          says which failures are retried).  Default
 *                          CONF_DEFAULT_FETCH_RETRIES.
 *   cache-evict = POLICY   which cached shard makes room when a remote
 *                          dataset is larger than cache-size: belady (the
 *                          default: the one the streams need furthest
 *                          ahead) or lru (the one used longest ago; there
 *                          to compare, bench/remote).  Read at the first
 *                          remote fetch, as cache-size is.
 *   memory-per-client = CAP  the largest ring one client may have, and
 *   memory-per-uid = CAP     the most ring memory the clients of one user
 *                          (SO_PEERCRED uid) may hold together: a SIZE as
 *                          memory-budget takes it (at least 1M), or a
 *                          share of memory-budget "P%", P in 1..100, which
 *                          follows the budget when a reload changes it.
 *                          An ATTACH over either is answered "ERR
 *                          over-budget" with the figures (asked, cap, in
 *                          use).  Defaults 25% and 50%: one client cannot
 *                          pin the budget, and one user leaves half of it
 *                          to the others.
 *
 * FLAGS OVER FILE
 *
 * Every key a struct conf holds carries a bit in conf->set once given.
 * The daemon parses the file into one struct conf, its flags into another
 * (conf_defaults, then conf_set per flag: "--workers 8" is
 * conf_set(&flags, "workers", "8")), and calls conf_merge(&file, &flags):
 * each key set in flags replaces the file's; flags' datasets replace the
 * file's dataset of the same name and add the others.
 */
#ifndef RINGFEED_PROTO_CONF_H
#define RINGFEED_PROTO_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aug_spec.h"
#include "ctl.h"
#include "err.h"

#define CONF_LINE_MAX 4096         /* a line, CR and LF included */
#define CONF_DATASETS_MAX 64
#define CONF_RECIPES_MAX 16
#define CONF_MIXTURES_MAX 16
#define CONF_MIX_MAX 1200         /* a mixture's text (= CTL_MIX_MAX) */
#define CONF_RECIPE_NAME_MAX 32    /* bytes of [A-Za-z0-9_-], first a letter */
#define CONF_PLUGINS_MAX 16
#define CONF_PLUGIN_NAME_MAX 32    /* = AUG_NAME_MAX */
#define CONF_ALLOW_MAX 64          /* ids in one allow-uid or allow-gid list */
#define CONF_PATH_MAX 1024         /* a dataset folder, NUL included */
#define CONF_SOCKET_MAX 107        /* bytes of sun_path before its NUL */
#define CONF_DEFAULT_SOCKET "/run/ringfeed/ringfeed.sock"
#define CONF_MEMORY_BUDGET_MIN (1ull << 20)
#define CONF_WATCHDOG_SEC_MAX 86400
#define CONF_PIXEL_CAP_MAX (1ull << 32)
#define CONF_SOCKET_MODE_MAX 0777
#define CONF_DEFAULT_SOCKET_MODE 0660
#define CONF_GROUP_MAX 32          /* bytes of a socket-group name */
#define CONF_NAME_MAX 32           /* bytes of a daemon's name (name =) */
#define CONF_CPUS_MAX 1024         /* CPUs cpu-list may name: 0..CONF_CPUS_MAX-1 */
#define CONF_NUMA_NODE_MAX 1023    /* the largest numa-node (the kernel's nodes 0..1023) */
#define CONF_MAX_CLIENTS_MAX 1024  /* a worker maps every attached ring (wire.h) */
#define CONF_MAX_CONNECTIONS_MAX 16384
#define CONF_IDLE_SEC_MAX 86400
#define CONF_WEIGHTS_MAX 64        /* rules in one weight list */
#define CONF_CPU_BUDGET_MAX 256    /* as many as the pool may hold (POOL_MAX) */
#define CONF_MEMORY_PER_CLIENT_PCT 25 /* memory-per-client's default, % of the budget */
#define CONF_MEMORY_PER_UID_PCT 50    /* memory-per-uid's default */
#define CONF_DEFAULT_CACHE_DIR "/var/cache/ringfeed"
#define CONF_DEFAULT_CACHE_SIZE (64ull << 30)
#define CONF_S3_REGION_MAX 63      /* = S3_REGION_MAX (daemon/fetch/s3.h) */
#define CONF_ENDPOINT_MAX 1023     /* = URL_MAX (proto/url.h) */
#define CONF_FETCH_RETRIES_MAX 20  /* = FETCH_RETRIES_MAX (daemon/fetch/fetch.h) */
#define CONF_DEFAULT_FETCH_RETRIES 4 /* = FETCH_RETRIES_DEFAULT */

/* The keys, in the order conf_format writes them; bits of conf->set. */
enum conf_key {
    CONF_SOCKET,
    CONF_DATASET, /* set once any dataset.NAME is */
    CONF_WORKERS,
    CONF_CPU_BUDGET,
    CONF_MEMORY_BUDGET,
    CONF_LOG_LEVEL,
    CONF_ALLOW_UID,
    CONF_ALLOW_GID,
    CONF_WATCHDOG_SEC,
    CONF_MAX_BAD_SAMPLES,
    CONF_PIXEL_CAP,
    CONF_SOCKET_MODE,
    CONF_SOCKET_GROUP,
    CONF_MAX_CLIENTS,
    CONF_MAX_CONNECTIONS,
    CONF_IDLE_SEC,
    CONF_WEIGHT,
    CONF_MAX_WEIGHT,
    CONF_MEMORY_PER_CLIENT,
    CONF_MEMORY_PER_UID,
    CONF_RECIPE, /* set once any recipe.NAME is */
    CONF_PLUGIN, /* set once any plugin.NAME is */
    CONF_NAME,
    CONF_CPU_LIST,
    CONF_NUMA_NODE,
    CONF_CACHE_DIR,
    CONF_CACHE_SIZE,
    CONF_S3_ENDPOINT,
    CONF_S3_REGION,
    CONF_FETCH_RETRIES,
    CONF_CACHE_EVICT,
    CONF_MIXTURE, /* set once any mixture.NAME is */
    CONF_KEY_COUNT
};

/* cache-evict: which cached shard of a remote dataset makes room
 * (daemon/ahead.h) */
enum conf_cache_evict {
    CONF_EVICT_BELADY,      /* the one needed furthest ahead (the default) */
    CONF_EVICT_LRU,         /* the one used longest ago */
    CONF_EVICT_COUNT
};

enum conf_log_level {
    CONF_LOG_ERROR,
    CONF_LOG_WARN,
    CONF_LOG_INFO,
    CONF_LOG_DEBUG,
    CONF_LOG_COUNT
};

struct conf_dataset {
    char name[CTL_DATASET_NAME_MAX + 1];
    char dir[CONF_PATH_MAX];
};

/* recipe.NAME = SPEC: an augmentation pipeline clients name as
 * augment=@NAME; spec is the line's text, checked by aug_spec_parse. */
struct conf_recipe {
    char name[CONF_RECIPE_NAME_MAX + 1];
    char spec[AUG_SPEC_MAX + 1];
};

/* mixture.NAME = MIX: datasets by weight (mix.h), attached as dataset=NAME. */
struct conf_mixture {
    char name[CTL_DATASET_NAME_MAX + 1];
    char mix[CONF_MIX_MAX + 1];
};

/* plugin.NAME = PATH: a shared object of the operator's own op
 * (daemon/plugin/ringfeed_transform.h), named in a spec as
 * Plugin:name=NAME; the daemon loads and checks the file. */
struct conf_plugin {
    char name[CONF_PLUGIN_NAME_MAX + 1];
    char path[CONF_PATH_MAX];
};

/* One rule of the weight list: clients named name, or of user uid, get
 * weight unless their ATTACH names one, and may ask for max at most. */
struct conf_weight {
    bool by_uid;
    uint32_t uid;
    char name[CTL_LABEL_MAX + 1];
    uint32_t weight;                 /* 1..CTL_ATTACH_WEIGHT_MAX */
    uint32_t max;                    /* weight..CTL_ATTACH_WEIGHT_MAX; 0: not given
                                      * (the larger of weight and max-weight) */
};

/* A cap on ring memory (memory-per-client, memory-per-uid): bytes, or a
 * share of memory-budget when percent is nonzero (conf_cap_bytes). */
struct conf_cap {
    uint64_t bytes;
    uint32_t percent;                /* 1..100; 0: bytes holds the cap */
};

struct conf {
    uint32_t set;                    /* 1u << enum conf_key, once given */
    char socket[CONF_SOCKET_MAX + 1];
    uint32_t workers;                /* 0: not set, the daemon picks; with
                                      * workers_auto, the count to start from */
    bool workers_auto;               /* workers = auto: the controller sizes the pool */
    uint32_t cpu_budget;             /* 0: not set, the daemon derives it */
    uint64_t memory_budget;          /* bytes; 0: not set, the daemon picks */
    enum conf_log_level log_level;
    uint32_t watchdog_sec;
    uint64_t max_bad_samples;
    uint64_t pixel_cap;
    uint32_t socket_mode;            /* permission bits, 0..0777 */
    char socket_group[CONF_GROUP_MAX + 1]; /* "" when not set */
    char name[CONF_NAME_MAX + 1];    /* the daemon's name among a node's (the
                                        daemon="" label of METRICS), "" none */
    uint64_t cpu_list[CONF_CPUS_MAX / 64]; /* cpu-list: CPU i is bit i; all 0
                                              when not set */
    uint32_t numa_node;              /* numa-node, read through conf_numa_node
                                        (0 is a node: the set bit says) */
    char cache_dir[CONF_PATH_MAX];   /* cache-dir */
    uint64_t cache_size;             /* cache-size, bytes */
    char s3_endpoint[CONF_ENDPOINT_MAX + 1]; /* "" when not set */
    char s3_region[CONF_S3_REGION_MAX + 1];  /* "" when not set */
    uint32_t fetch_retries;
    enum conf_cache_evict cache_evict; /* cache-evict */
    uint32_t max_clients;
    uint32_t max_connections;
    uint32_t idle_sec;
    unsigned n_allow_uid, n_allow_gid;
    uint32_t allow_uid[CONF_ALLOW_MAX];
    uint32_t allow_gid[CONF_ALLOW_MAX];
    unsigned n_datasets;
    struct conf_dataset datasets[CONF_DATASETS_MAX];
    unsigned n_weights;
    struct conf_weight weights[CONF_WEIGHTS_MAX];
    uint32_t max_weight;             /* the most a client no rule covers may ask for */
    struct conf_cap memory_per_client;
    struct conf_cap memory_per_uid;
    unsigned n_recipes;
    struct conf_recipe recipes[CONF_RECIPES_MAX];
    unsigned n_mixtures;
    struct conf_mixture mixtures[CONF_MIXTURES_MAX];
    unsigned n_plugins;
    struct conf_plugin plugins[CONF_PLUGINS_MAX];
};

/* The cap in bytes under a memory budget of budget bytes. */
uint64_t conf_cap_bytes(const struct conf_cap *cap, uint64_t budget);

/* The weight the config gives a client called name (NULL or "": none) of
 * user uid: the first rule naming it, else the first rule of its uid, else
 * 1.  (An ATTACH weight= comes before both; fairq.c, WEIGHTS.) */
uint32_t conf_weight_for(const struct conf *c, const char *name, uint32_t uid);
/* The most weight the same client may have, by the same rule: its /MAX,
 * else the larger of its weight and max-weight; with no rule, max-weight.
 * An ATTACH weight= above it is lowered to it (stream.c and fairq.c, WEIGHTS). */
uint32_t conf_weight_max(const struct conf *c, const char *name, uint32_t uid);

/* The mixture called name, or NULL. */
const struct conf_mixture *conf_find_mixture(const struct conf *c, const char *name);
/* Each mixture against the datasets (after the file, drop-ins and flags
 * are merged): its name is no dataset's, and each of its sources is one.
 * 0, or -EINVAL with err naming the mixture and the name. */
int conf_check_mixtures(const struct conf *c, struct rf_err *err);
/* The recipe called name[0..len), or NULL. */
const struct conf_recipe *conf_find_recipe(const struct conf *c, const char *name, size_t len);
/* The recipes' names, space separated, into buf ("(none)" without any). */
void conf_recipe_names(const struct conf *c, char *buf, size_t cap);
/* The plugin called name[0..len), or NULL. */
const struct conf_plugin *conf_find_plugin(const struct conf *c, const char *name, size_t len);

/* The key's name as a file writes it ("workers"; "dataset.NAME" for the
 * family of dataset keys), or NULL for a value out of range. */
const char *conf_key_name(enum conf_key k);

/* Fills c with the defaults above, nothing set. */
void conf_defaults(struct conf *c);

static inline bool conf_is_set(const struct conf *c, enum conf_key k)
{
    return (c->set >> k) & 1u;
}

/* numa-node's node, or -1 when the key is not set. */
static inline int conf_numa_node(const struct conf *c)
{
    return conf_is_set(c, CONF_NUMA_NODE) ? (int)c->numa_node : -1;
}

/*
 * Parses the file in buf[0..len) into out (first reset to the defaults).
 * Returns 0, or -EINVAL with "line N: <key>: <what is wrong and what is
 * accepted>" in err (the caller prefixes the file name).  out is fully
 * written either way; after an error it holds the lines before the bad one.
 */
int conf_parse(const char *buf, size_t len, struct conf *out, struct rf_err *err);

/*
 * Sets key (NUL-terminated, e.g. "workers" or "dataset.fmnist") from value
 * (NUL-terminated, no surrounding blanks) as one file line would, and marks
 * it set.  Returns 0; -ENOENT for an unknown key, -EEXIST for a key (or a
 * dataset name) already set, -E2BIG past a count bound, -EINVAL for a bad
 * value; each with "<key>: ..." in err.
 */
int conf_set(struct conf *c, const char *key, const char *value, struct rf_err *err);

/*
 * Flags over file: copies every key set in src into dst (see FLAGS OVER
 * FILE).  Returns 0, or -E2BIG when the datasets would pass
 * CONF_DATASETS_MAX (dst is then unchanged).
 */
int conf_merge(struct conf *dst, const struct conf *src, struct rf_err *err);

/*
 * Parses a size: digits with an optional K, M, G, T, KiB, MiB, GiB or TiB
 * suffix (powers of 1024, any case), no blanks, e.g. "512M" -> 536870912.
 * Shared with the daemon's --memory-budget flag.  Returns 0, -EINVAL for
 * bad syntax, -ERANGE past 2^64 - 1.
 */
int conf_parse_size(const char *s, uint64_t *out);

/* The dataset called name, or NULL. */
const struct conf_dataset *conf_find_dataset(const struct conf *c, const char *name);

/* Is a dataset.NAME value (checked by conf_set) a remote pack's URL rather
 * than a local folder? */
bool conf_dataset_remote(const char *dir);

/* "error", "warn", "info", "debug"; NULL out of range. */
const char *conf_log_level_name(enum conf_log_level l);
const char *conf_cache_evict_name(enum conf_cache_evict e);

/*
 * Writes every set key of c as a file conf_parse reads back to the same
 * struct (for "ringfeedd --print-config"), NUL-terminated.  Returns the
 * length or -ENOSPC.
 */
int conf_format(const struct conf *c, char *buf, size_t cap);

/* True when a and b hold the same settings (set bits included). */
bool conf_equal(const struct conf *a, const struct conf *b);

/*
 * The start-up check of the key table: one row per enum conf_key, in
 * order, names unique, ranges sane, the defaults inside them.  Returns 0,
 * or -EINVAL with the first problem in err.
 */
int conf_check_table(struct rf_err *err);

#endif
