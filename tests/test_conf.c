/*
 * test_conf.c - the daemon's config file: the documented example, every
 * key at its bounds and one past, the line syntax (comments, blanks, CRLF,
 * a last line without LF, NUL and control bytes, overlong lines), errors
 * that name the line, the key and what is accepted, duplicates, the count
 * bounds, the size parser, flags over file (conf_set + conf_merge), and
 * conf_format round trips.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "tap.h"

/* Large: kept off the stack of each check. */
static struct conf c, c2, c3;
static struct rf_err e;

static int parse(const char *text)
{
    e.msg[0] = '\0';
    return conf_parse(text, strlen(text), &c, &e);
}

static void expect_ok(const char *text, const char *name)
{
    if (!tap_ok(parse(text) == 0, "%s", name))
        tap_diag("  error: %s", e.msg);
}

/* Expects -EINVAL and each NULL-terminated substring in the message. */
static void expect_bad(const char *text, const char *name, ...)
{
    va_list ap;
    const char *sub;
    int good = parse(text) == -EINVAL;

    va_start(ap, name);
    while ((sub = va_arg(ap, const char *)) != NULL)
        if (!strstr(e.msg, sub))
            good = 0;
    va_end(ap);
    if (!tap_ok(good, "%s", name))
        tap_diag("  got message \"%s\"", e.msg);
}

/* One "key = value" line; ok or bad naming the key. */
static void one(const char *key, const char *value, int want_ok)
{
    char text[2048];

    snprintf(text, sizeof(text), "%s = %s\n", key, value);
    if (want_ok) {
        if (!tap_ok(parse(text) == 0, "%s = %.40s accepted", key, value))
            tap_diag("  error: %s", e.msg);
    } else {
        int good = parse(text) == -EINVAL && strstr(e.msg, "line 1") && strstr(e.msg, key);

        if (!tap_ok(good, "%s = %.40s refused, naming line and key", key, value))
            tap_diag("  message \"%s\"", e.msg);
    }
}

static void test_table_and_defaults(void)
{
    TAP_IS_INT(conf_check_table(&e), 0, "the key table passes its start-up check");
    expect_ok("", "an empty file is fine");
    TAP_IS_INT(c.set, 0, "nothing set");
    TAP_IS_STR(c.socket, CONF_DEFAULT_SOCKET, "default socket");
    TAP_IS_INT(c.workers, 0, "workers unset (daemon picks)");
    TAP_OK(!c.workers_auto && c.cpu_budget == 0, "not auto, cpu budget unset (daemon derives)");
    TAP_IS_INT(c.memory_budget, 0, "memory budget unset (daemon picks)");
    TAP_IS_INT(c.log_level, CONF_LOG_INFO, "default log level info");
    TAP_IS_INT(c.watchdog_sec, 60, "default watchdog 60 s");
    TAP_IS_INT(c.max_bad_samples, 1000, "default max-bad-samples 1000");
    TAP_IS_INT(c.pixel_cap, 67108864, "default pixel cap 8192 x 8192");
    TAP_IS_INT(c.socket_mode, 0660, "default socket mode 0660");
    TAP_IS_STR(c.socket_group, "", "socket group unset (the daemon's own)");
    TAP_OK(c.max_clients == 256 && c.max_connections == 1024 && c.idle_sec == 60,
           "default max-clients 256, max-connections 1024, idle-sec 60");
    TAP_IS_INT(c.max_weight, 1, "default max-weight 1: a client cannot raise its own weight");
    TAP_IS_INT(conf_weight_max(&c, "any", 1000), 1, "  so every client's cap is 1");
    TAP_IS_INT(c.n_datasets + c.n_allow_uid + c.n_allow_gid, 0, "no datasets, no allow lists");
    TAP_IS_STR(conf_log_level_name(CONF_LOG_DEBUG), "debug", "level names");
    TAP_OK(conf_log_level_name(CONF_LOG_COUNT) == NULL, "level name out of range");
}

static void test_example(void)
{
    static const char example[] =
        "# ringfeedd.conf\n"
        "socket        = /run/ringfeed/ringfeedd.sock\n"
        "dataset.fmnist   = /var/lib/ringfeed/fmnist\n"
        "dataset.imagenet = /srv/data/imagenet\n"
        "workers       = 8\n"
        "cpu-budget    = 8\n"
        "memory-budget = 16G\n"
        "log-level     = info\n"
        "allow-uid     = 1000, 1001\n"
        "allow-gid     = 2000\n"
        "watchdog-sec  = 60\n"
        "max-bad-samples = 1000\n"
        "pixel-cap     = 67108864\n"
        "socket-mode   = 0660\n"
        "socket-group  = ringfeed\n"
        "max-clients   = 256\n"
        "max-connections = 1024\n"
        "idle-sec      = 60\n"
        "weight        = name:trainer=3, uid:1000=2/8\n"
        "max-weight    = 1\n"
        "memory-per-client = 25%\n"
        "memory-per-uid    = 8G\n"
        "recipe.cifar  = RandomCrop:size=32:padding=4,RandomHorizontalFlip\n"
        "plugin.sepia  = /usr/lib/ringfeed/plugins/sepia.so\n"
        "name          = gpu0\n"
        "cpu-list      = 0-15,32-47\n"
        "numa-node     = 0\n"
        "dataset.web   = https://data.example.org/packs/imagenet/\n"
        "dataset.lake  = s3://training-data/imagenet/\n"
        "cache-dir     = /var/cache/ringfeed\n"
        "cache-size    = 64G\n"
        "s3-endpoint   = http://127.0.0.1:9000\n"
        "s3-region     = eu-west-1\n"
        "fetch-retries = 4\n"
        "cache-evict   = belady\n"
        "mixture.blend = fmnist:0.7 imagenet:0.3\n";

    expect_ok(example, "the example in conf.h parses");
    TAP_IS_STR(c.name, "gpu0", "name");
    TAP_OK(c.cpu_list[0] == 0x0000ffff0000ffffull && c.cpu_list[1] == 0,
           "cpu-list 0-15,32-47: those bits");
    TAP_IS_INT(conf_numa_node(&c), 0, "numa-node 0: node 0, not none");

    TAP_OK(c.n_recipes == 1 && conf_find_recipe(&c, "cifar", 5) &&
           strcmp(conf_find_recipe(&c, "cifar", 5)->spec,
                  "RandomCrop:size=32:padding=4,RandomHorizontalFlip") == 0,
           "recipe.cifar: its spec as written");
    TAP_IS_INT(c.n_weights, 2, "two weight rules");
    TAP_IS_INT(conf_weight_for(&c, "trainer", 1000), 3, "  a name rule before a uid rule");
    TAP_IS_INT(conf_weight_for(&c, "other", 1000), 2, "  the uid rule for another name");
    TAP_IS_INT(conf_weight_for(&c, NULL, 1000), 2, "  and for no name");
    TAP_IS_INT(conf_weight_for(&c, "trainer2", 7), 1, "  else weight 1");
    TAP_IS_INT(conf_weight_max(&c, "trainer", 1000), 3,
               "  a rule without /MAX caps at the larger of W and max-weight");
    TAP_IS_INT(conf_weight_max(&c, "other", 1000), 8, "  uid:1000=2/8 caps its user at 8");
    TAP_IS_INT(conf_weight_max(&c, "trainer2", 7), 1, "  no rule: max-weight");
    TAP_IS_INT(c.set, (uint32_t)((1ull << CONF_KEY_COUNT) - 1), "every key set");
    TAP_OK(c.n_mixtures == 1 && conf_find_mixture(&c, "blend") &&
           strcmp(conf_find_mixture(&c, "blend")->mix, "fmnist:0.7 imagenet:0.3") == 0,
           "mixture.blend: its text as written");
    TAP_IS_INT(c.workers, 8, "workers");
    TAP_OK(!c.workers_auto, "workers = 8 is a fixed count");
    TAP_IS_INT(c.cpu_budget, 8, "cpu-budget");
    TAP_IS_INT(c.memory_budget, 16ull << 30, "memory-budget 16G");
    TAP_IS_INT(c.n_datasets, 4, "four datasets, two of them remote");
    TAP_OK(!conf_dataset_remote(c.datasets[0].dir) && conf_dataset_remote(c.datasets[2].dir) &&
           conf_dataset_remote(c.datasets[3].dir), "a URL value is remote, a folder is not");
    TAP_IS_STR(c.datasets[3].dir, "s3://training-data/imagenet/", "an s3 dataset as written");
    TAP_IS_STR(c.cache_dir, "/var/cache/ringfeed", "cache-dir");
    TAP_IS_INT(c.cache_size, 64ull << 30, "cache-size 64G");
    TAP_IS_STR(c.s3_endpoint, "http://127.0.0.1:9000", "s3-endpoint");
    TAP_IS_STR(c.s3_region, "eu-west-1", "s3-region");
    TAP_IS_INT(c.fetch_retries, 4, "fetch-retries");
    TAP_IS_INT(c.cache_evict, CONF_EVICT_BELADY, "cache-evict belady");
    TAP_IS_STR(c.datasets[1].name, "imagenet", "dataset name");
    TAP_IS_STR(c.datasets[1].dir, "/srv/data/imagenet", "dataset dir");
    TAP_OK(conf_find_dataset(&c, "fmnist") == &c.datasets[0], "find a dataset");
    TAP_OK(conf_find_dataset(&c, "FMNIST") == NULL, "dataset names are case-sensitive");
    TAP_OK(c.n_allow_uid == 2 && c.allow_uid[0] == 1000 && c.allow_uid[1] == 1001,
           "allow-uid list");
    TAP_OK(c.n_allow_gid == 1 && c.allow_gid[0] == 2000, "allow-gid list");
    TAP_IS_INT(c.socket_mode, 0660, "socket-mode");
    TAP_IS_STR(c.socket_group, "ringfeed", "socket-group");
    TAP_OK(c.memory_per_client.percent == 25 && c.memory_per_uid.percent == 0 &&
           c.memory_per_uid.bytes == 8ull << 30, "memory-per-client 25%, memory-per-uid 8G");
}

/* memory-per-client, memory-per-uid: a size or a share of memory-budget */
static void test_caps(void)
{
    expect_ok("", "caps: defaults");
    TAP_OK(c.memory_per_client.percent == CONF_MEMORY_PER_CLIENT_PCT &&
           c.memory_per_uid.percent == CONF_MEMORY_PER_UID_PCT &&
           CONF_MEMORY_PER_CLIENT_PCT == 25 && CONF_MEMORY_PER_UID_PCT == 50,
           "caps: default memory-per-client 25%%, memory-per-uid 50%% of the budget");
    TAP_IS_INT(conf_cap_bytes(&c.memory_per_client, 4ull << 30), 1ull << 30,
               "caps: 25% of a 4G budget is 1G");
    TAP_IS_INT(conf_cap_bytes(&c.memory_per_uid, 4ull << 30), 2ull << 30,
               "caps: 50% of a 4G budget is 2G");
    TAP_IS_INT(conf_cap_bytes(&(struct conf_cap){ .percent = 100 }, UINT64_MAX),
               UINT64_MAX / 100 * 100, "caps: a share of a huge budget does not overflow");
    TAP_IS_INT(conf_cap_bytes(&(struct conf_cap){ .bytes = 5 << 20 }, 1ull << 30), 5 << 20,
               "caps: a size is itself, whatever the budget");
    one("memory-per-client", "1%", 1);
    TAP_OK(c.memory_per_client.percent == 1 && c.memory_per_client.bytes == 0, "caps: 1%");
    one("memory-per-client", "100%", 1);
    one("memory-per-client", "512M", 1);
    TAP_OK(c.memory_per_client.percent == 0 && c.memory_per_client.bytes == 512ull << 20,
           "caps: 512M");
    one("memory-per-uid", "1M", 1);
    one("memory-per-uid", "2T", 1);
    one("memory-per-client", "0%", 0);
    one("memory-per-client", "101%", 0);
    one("memory-per-client", "%", 0);
    one("memory-per-client", "50 %", 0);
    one("memory-per-client", "-5%", 0);
    one("memory-per-client", "1.5%", 0);
    one("memory-per-uid", "1023K", 0);
    one("memory-per-uid", "lots", 0);
    one("memory-per-uid", "", 0);
    expect_bad("memory-per-uid = 200%\n", "caps: a bad cap names the forms",
               "memory-per-uid", "at least 1M", "P% with P in 1..100", NULL);
    expect_ok("memory-per-client = 30%\nmemory-per-uid = 3G\n", "caps: both set");
    {
        char buf[4096];
        int n = conf_format(&c, buf, sizeof(buf));

        TAP_IS_STR(n > 0 ? buf : "", "memory-per-client = 30%\nmemory-per-uid = 3G\n",
                   "caps: written as a share and as a size");
        TAP_OK(n > 0 && conf_parse(buf, (size_t)n, &c2, &e) == 0 && conf_equal(&c, &c2),
               "caps: and read back the same");
        c2 = c;
        c2.memory_per_client.percent = 31;
        TAP_OK(!conf_equal(&c, &c2), "caps: shares differ");
        c2 = c;
        c2.memory_per_uid.bytes++;
        TAP_OK(!conf_equal(&c, &c2), "caps: sizes differ");
    }
    conf_defaults(&c3);
    TAP_IS_INT(conf_set(&c3, "memory-per-uid", "10%", &e), 0, "caps: a flag");
    expect_ok("memory-per-uid = 3G\n", "caps: the file");
    TAP_IS_INT(conf_merge(&c, &c3, &e), 0, "caps: flags over file");
    TAP_OK(c.memory_per_uid.percent == 10 && c.memory_per_uid.bytes == 0 &&
           c.memory_per_client.percent == CONF_MEMORY_PER_CLIENT_PCT,
           "caps: the flag's share replaces the file's size; the other keeps its default");
}

static void test_keys(void)
{
    char path[1100];

    one("workers", "1", 1);
    one("max-clients", "1", 1);
    one("max-clients", "1024", 1);
    one("max-clients", "0", 0);
    one("max-clients", "1025", 0);
    one("max-connections", "16384", 1);
    one("max-connections", "0", 0);
    one("idle-sec", "0", 1);
    one("idle-sec", "86401", 0);
    one("workers", "256", 1);
    one("workers", "0", 0);
    one("workers", "257", 0);
    one("workers", "eight", 0);
    one("workers", "", 0);
    expect_bad("workers = 0\n", "workers message says the range", "workers", "1..256",
               "\"0\"", NULL);
    one("workers", "auto", 1);
    TAP_OK(c.workers_auto && c.workers == 0 && conf_is_set(&c, CONF_WORKERS),
           "workers = auto: auto, no count, set");
    one("workers", "AUTO", 0);
    one("workers", "auto4", 0);
    expect_bad("workers = banana\n", "workers = banana names the key and what it takes",
               "line 1", "workers", "1..256 or auto", "\"banana\"", NULL);
    one("cpu-budget", "1", 1);
    TAP_OK(c.cpu_budget == 1 && !c.workers_auto, "cpu-budget 1");
    one("cpu-budget", "256", 1);
    one("cpu-budget", "0", 0);
    one("cpu-budget", "257", 0);
    one("cpu-budget", "auto", 0);
    expect_bad("cpu-budget = 9999\n", "cpu-budget = 9999 names the key and the range",
               "line 1", "cpu-budget", "1..256", "\"9999\"", NULL);
    expect_bad("cpu-budget = 0\n", "cpu-budget = 0 names the key and the range", "cpu-budget",
               "1..256", NULL);

    one("memory-budget", "1M", 1);
    TAP_IS_INT(c.memory_budget, 1u << 20, "1M");
    one("memory-budget", "1048576", 1);
    one("memory-budget", "1048575", 0);
    one("memory-budget", "1023K", 0);
    one("memory-budget", "1024KiB", 1);
    one("memory-budget", "512m", 1);
    TAP_IS_INT(c.memory_budget, 512u << 20, "512m");
    one("memory-budget", "2t", 1);
    TAP_IS_INT(c.memory_budget, 2ull << 40, "2t");
    one("memory-budget", "16777216T", 0);
    one("memory-budget", "1.5G", 0);
    one("memory-budget", "-1G", 0);
    one("memory-budget", "12 G", 0);
    one("memory-budget", "5GB", 0);
    expect_bad("memory-budget = 512\n", "a budget without unit too small is refused",
               "memory-budget", "at least 1M", NULL);

    one("log-level", "error", 1);
    TAP_IS_INT(c.log_level, CONF_LOG_ERROR, "error");
    one("log-level", "warn", 1);
    one("log-level", "info", 1);
    one("log-level", "debug", 1);
    TAP_IS_INT(c.log_level, CONF_LOG_DEBUG, "debug");
    one("log-level", "verbose", 0);
    one("log-level", "INFO", 0);
    expect_bad("log-level = trace\n", "level message lists levels", "error, warn, info, debug",
               NULL);

    one("allow-uid", "0", 1);
    one("allow-uid", "4294967294", 1);
    one("allow-uid", "4294967295", 0);
    one("allow-uid", "1,2,\t3 ,4", 1);
    TAP_OK(c.n_allow_uid == 4 && c.allow_uid[3] == 4, "blanks around commas");
    one("allow-uid", "1,,2", 0);
    one("allow-uid", "1,", 0);
    one("allow-uid", "", 0);
    one("allow-uid", "-1", 0);
    one("allow-gid", "100,200", 1);
    one("allow-gid", "root", 0);
    {
        char list[1024];
        size_t o = 0;

        for (int i = 0; i < CONF_ALLOW_MAX; i++)
            o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%d", i ? "," : "", i);
        one("allow-gid", list, 1);
        TAP_IS_INT(c.n_allow_gid, CONF_ALLOW_MAX, "64 ids");
        snprintf(list + o, sizeof(list) - o, ",64");
        one("allow-gid", list, 0);
        TAP_OK(strstr(e.msg, "more than 64") != NULL, "65 ids: says the bound");
    }

    one("watchdog-sec", "0", 1);
    one("watchdog-sec", "86400", 1);
    one("watchdog-sec", "86401", 0);
    one("max-bad-samples", "0", 1);
    one("max-bad-samples", "18446744073709551615", 1);
    one("max-bad-samples", "18446744073709551616", 0);
    one("pixel-cap", "1", 1);
    one("pixel-cap", "4294967296", 1);
    one("pixel-cap", "0", 0);
    one("pixel-cap", "4294967297", 0);

    one("socket-mode", "0660", 1);
    TAP_IS_INT(c.socket_mode, 0660, "0660 is octal");
    one("socket-mode", "666", 1);
    TAP_IS_INT(c.socket_mode, 0666, "666 is octal too");
    one("socket-mode", "0", 1);
    one("socket-mode", "0777", 1);
    one("socket-mode", "1777", 0);
    one("socket-mode", "0778", 0);
    one("socket-mode", "0o660", 0);
    one("socket-mode", "rw-rw----", 0);
    one("socket-mode", "0000660", 0);
    one("socket-mode", "", 0);
    expect_bad("socket-mode = 8\n", "mode message says octal", "socket-mode", "octal", NULL);
    one("socket-group", "ringfeed", 1);
    one("socket-group", "0", 1);
    one("socket-group", "Video_2.x-y", 1);
    one("socket-group", "-ringfeed", 0);
    one("socket-group", "ring feed", 0);
    one("socket-group", "grp:x", 0);
    one("socket-group", "abcdefghijabcdefghijabcdefghijab", 1);
    one("socket-group", "abcdefghijabcdefghijabcdefghijabc", 0);
    expect_bad("socket-group = a/b\n", "group message says what is accepted", "socket-group",
               "group name or number", NULL);
    one("weight", "name:trainer=3", 1);
    one("weight", "uid:0=1000, name:a.b@c/d+e-f:g=1", 1);
    one("weight", "name:x=0", 0);
    one("weight", "name:x=1001", 0);
    one("weight", "name:=3", 0);
    one("weight", "name:a b=3", 0);
    one("weight", "uid:4294967295=2", 0);
    one("weight", "uid:x=2", 0);
    one("weight", "gid:5=2", 0);
    one("weight", "name:x", 0);
    one("weight", "name:x=3,", 0);
    one("weight", "", 0);
    one("weight", "uid:1000=2/8", 1);
    one("weight", "name:x=3/3, uid:0=1/1000", 1);
    one("weight", "name:x=3/2", 0);
    one("weight", "name:x=3/1001", 0);
    one("weight", "name:x=3/", 0);
    one("weight", "name:x=/4", 0);
    one("weight", "name:x=3/4/5", 0);
    one("max-weight", "1", 1);
    one("max-weight", "1000", 1);
    one("max-weight", "0", 0);
    one("max-weight", "1001", 0);
    expect_bad("weight = name:x=3, pid:4=2\n", "a bad weight rule is named with the forms",
               "weight", "\"pid:4=2\"", "name:LABEL=W or uid:UID=W", "1..1000", NULL);

    one("socket", "/run/x.sock", 1);
    one("socket", "run/x.sock", 0);
    memset(path, 'a', sizeof(path));
    path[0] = '/';
    path[CONF_SOCKET_MAX] = '\0';
    one("socket", path, 1);
    path[CONF_SOCKET_MAX] = 'a';
    path[CONF_SOCKET_MAX + 1] = '\0';
    one("socket", path, 0);
    TAP_OK(strstr(e.msg, "at most 107 bytes") != NULL, "socket: says the bound");

    one("dataset.fmnist", "/var/lib/ringfeed/fmnist", 1);
    one("dataset.A.b_c-9", "/x", 1);
    one("dataset.fmnist", "relative/dir", 0);
    one("dataset.bad/name", "/x", 0);
    one("dataset.", "/x", 0);
    one("dataset", "/x", 0);
    expect_bad("dataset = fmnist:/x\n", "the other form is an unknown key, and says so",
               "unknown key \"dataset\"", "dataset.NAME", NULL);
    one("dataset.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "/x", 1);
    one("dataset.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "/x", 0);
    memset(path, 'a', sizeof(path));
    path[0] = '/';
    path[CONF_PATH_MAX - 1] = '\0';
    TAP_IS_INT(strlen(path), CONF_PATH_MAX - 1, "a dir of CONF_PATH_MAX - 1 bytes");
    one("dataset.big", path, 1);
    path[CONF_PATH_MAX - 1] = 'a';
    path[CONF_PATH_MAX] = '\0';
    one("dataset.big", path, 0);
    expect_ok("dataset.sp =  /data/my set # not a comment \t\n", "a dir with blanks and #");
    TAP_IS_STR(c.datasets[0].dir, "/data/my set # not a comment", "value trimmed, kept whole");
}

static void test_syntax(void)
{
    char *big;

    expect_ok("# comment\n\n   \n\t# indented comment = with equals\nworkers=4\n",
              "comments and blank lines");
    TAP_IS_INT(c.workers, 4, "workers=4 without blanks");
    expect_ok("workers = 4\r\nlog-level = warn\r\n", "CRLF");
    TAP_IS_INT(c.log_level, CONF_LOG_WARN, "CRLF value");
    expect_ok("log-level = debug", "last line without LF");
    TAP_IS_INT(c.log_level, CONF_LOG_DEBUG, "last line value");
    expect_ok("log-level = debug\r", "last line with a lone CR");
    expect_ok("  workers\t=\t16  \n", "blanks and tabs around key and value");
    TAP_IS_INT(c.workers, 16, "value 16");

    expect_bad("# ok\nworkers 8\n", "line without =", "line 2", "expected key = value", NULL);
    expect_bad("= 8\n", "line without key", "line 1", "no key", NULL);
    expect_bad("\n\nwrokers = 8\n", "unknown key", "line 3", "\"wrokers\"", "workers",
               "dataset.NAME", NULL);
    expect_bad("Workers = 8\n", "keys are lower case", "line 1", "unknown key", NULL);
    expect_bad("workers = 4\n# x\nworkers = 8\n", "duplicate scalar key", "line 3", "workers",
               "given twice", "first on line 1", NULL);
    expect_bad("dataset.a = /x\ndataset.b = /y\n\ndataset.a = /z\n", "duplicate dataset",
               "line 4", "dataset.a", "first on line 1", NULL);
    {
        struct conf *cm = malloc(sizeof(*cm));
        struct rf_err e2;

        { const char *t = "dataset.a = /a\ndataset.b = /b\nmixture.m = a:1 b:2\n"; conf_parse(t, strlen(t), cm, &e2); }
        TAP_IS_INT(conf_check_mixtures(cm, &e2), 0, "a mixture of two datasets checks");
        { const char *t = "dataset.a = /a\nmixture.m = a:1 b:2\n"; conf_parse(t, strlen(t), cm, &e2); }
        TAP_IS_INT(conf_check_mixtures(cm, &e2), -EINVAL, "a source the config lacks");
        TAP_OK(strstr(e2.msg, "mixture.m: b is not a dataset") != NULL, "  named");
        { const char *t = "dataset.a = /a\ndataset.b = /b\nmixture.a = a:1 b:2\n"; conf_parse(t, strlen(t), cm, &e2); }
        TAP_IS_INT(conf_check_mixtures(cm, &e2), -EINVAL, "a mixture named as a dataset");
        TAP_OK(strstr(e2.msg, "dataset.a has that name too") != NULL, "  named");
        free(cm);
    }
    expect_bad("mixture.m = a:1 b:1\nmixture.m = a:1 c:1\n", "duplicate mixture", "line 2",
               "mixture.m: given twice", "first on line 1", NULL);
    expect_bad("mixture.m = a:1\n", "a mixture of one", "line 1", "mixture.m",
               "a mixture needs 2", NULL);
    expect_bad("mixture.m = a:1 b:zero\n", "a mixture's bad weight", "line 1",
               "b: weight 'zero'", NULL);
    expect_bad("mixture.a/b = a:1 b:1\n", "a mixture's bad name", "line 1",
               "the name after \"mixture.\"", NULL);
    expect_bad("recipe.a = RandomInvert\nrecipe.b = RandomVerticalFlip\nrecipe.a = RandomInvert\n",
               "duplicate recipe", "line 3", "recipe.a", "given twice", "first on line 1", NULL);
    expect_bad("recipe.a = RandomInvert:p=2\n", "a recipe whose spec is bad", "line 1",
               "recipe.a", "RandomInvert", "for p", NULL);
    expect_bad("recipe.1a = RandomInvert\n", "a recipe's name", "line 1",
               "after \"recipe.\"", NULL);
    expect_bad("recipe.a = \n", "an empty recipe", "line 1", "empty spec", NULL);
    expect_ok("plugin.sepia = /usr/lib/ringfeed/plugins/sepia.so\nplugin.b = /x y/b.so\n",
              "two plugins");
    TAP_OK(c.n_plugins == 2 && conf_find_plugin(&c, "sepia", 5) &&
           strcmp(conf_find_plugin(&c, "b", 1)->path, "/x y/b.so") == 0 &&
           !conf_find_plugin(&c, "Sepia", 5), "plugins by their exact name, paths as written");
    expect_bad("plugin.a = /a.so\nplugin.a = /b.so\n", "duplicate plugin", "line 2",
               "plugin.a", "given twice", "first on line 1", NULL);
    expect_bad("plugin.a = a.so\n", "a relative plugin path", "line 1", "plugin.a",
               "absolute path", NULL);
    expect_bad("plugin.9 = /a.so\n", "a plugin's name", "line 1", "after \"plugin.\"", NULL);
    expect_ok("recipe.a = RandomInvert\nrecipe.B-2 = RandomVerticalFlip:p=1 \n", "two recipes");
    TAP_OK(c.n_recipes == 2 && strcmp(c.recipes[1].spec, "RandomVerticalFlip:p=1") == 0 &&
           conf_find_recipe(&c, "B-2", 3) && !conf_find_recipe(&c, "b-2", 3),
           "recipes by their exact name, the value trimmed");
    {
        static const char nul[] = "workers = 4\nlog-level = in\0fo\n";
        TAP_IS_INT(conf_parse(nul, sizeof(nul) - 1, &c, &e), -EINVAL, "NUL byte refused");
        TAP_OK(strstr(e.msg, "line 2") && strstr(e.msg, "NUL"), "NUL: names the line");
    }
    expect_bad("workers = 4\x01\n", "control byte refused", "line 1", "0x01", NULL);
    expect_bad("workers = 4\x7f\n", "DEL refused", "line 1", NULL);
    expect_bad("workers = 4\rlog-level = info\n", "a CR inside a line is refused", "line 1",
               NULL);

    big = malloc(CONF_LINE_MAX + 10);
    memset(big, ' ', CONF_LINE_MAX + 9);
    memcpy(big, "# ", 2);
    big[CONF_LINE_MAX - 1] = '\n'; /* exactly CONF_LINE_MAX with its LF */
    big[CONF_LINE_MAX] = '\0';
    expect_ok(big, "a line of exactly CONF_LINE_MAX bytes");
    big[CONF_LINE_MAX - 1] = ' ';
    big[CONF_LINE_MAX] = '\n';
    big[CONF_LINE_MAX + 1] = '\0';
    expect_bad(big, "a line one byte longer", "line 1", "longer than 4095", NULL);
    free(big);

    /* 64 datasets fit, the 65th does not */
    {
        size_t cap = 70 * 40, o = 0;
        char *t = malloc(cap);

        for (int i = 0; i < CONF_DATASETS_MAX; i++)
            o += (size_t)snprintf(t + o, cap - o, "dataset.d%d = /data/d%d\n", i, i);
        expect_ok(t, "64 datasets");
        TAP_IS_INT(c.n_datasets, CONF_DATASETS_MAX, "all 64 kept");
        snprintf(t + o, cap - o, "dataset.extra = /x\n");
        expect_bad(t, "65 datasets", "line 65", "more than 64", NULL);
        free(t);
    }
}

static void test_size(void)
{
    static const struct {
        const char *s;
        int r;
        uint64_t v;
    } cases[] = {
        {"0", 0, 0},
        {"1", 0, 1},
        {"1k", 0, 1024},
        {"1K", 0, 1024},
        {"512M", 0, 512ull << 20},
        {"2GiB", 0, 2ull << 30},
        {"3tib", 0, 3ull << 40},
        {"18446744073709551615", 0, UINT64_MAX},
        {"16777215T", 0, 16777215ull << 40},
        {"16777216T", -ERANGE, 0},
        {"18446744073709551616", -ERANGE, 0},
        {"", -EINVAL, 0},
        {"M", -EINVAL, 0},
        {"5X", -EINVAL, 0},
        {"5MB", -EINVAL, 0},
        {"5Mi", -EINVAL, 0},
        {" 5", -EINVAL, 0},
        {"5 ", -EINVAL, 0},
        {"-5", -EINVAL, 0},
        {"1.5G", -EINVAL, 0},
        {"5KK", -EINVAL, 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = 12345;
        int r = conf_parse_size(cases[i].s, &v);

        if (!tap_ok(r == cases[i].r && (r < 0 ? v == 12345 : v == cases[i].v),
                    "conf_parse_size(\"%s\")", cases[i].s))
            tap_diag("  got %d, %llu", r, (unsigned long long)v);
    }
}

static void test_flags_merge(void)
{
    struct rf_err fe;

    expect_ok("socket = /run/file.sock\nworkers = 4\nlog-level = warn\n"
              "dataset.a = /file/a\ndataset.b = /file/b\n",
              "the file");
    c2 = c;
    conf_defaults(&c3);
    TAP_IS_INT(conf_set(&c3, "workers", "8", &fe), 0, "flag --workers 8");
    TAP_IS_INT(conf_set(&c3, "dataset.b", " /flag/b ", &fe), 0, "flag dataset b (trimmed)");
    TAP_IS_INT(conf_set(&c3, "dataset.c", "/flag/c", &fe), 0, "flag dataset c");
    TAP_IS_INT(conf_set(&c3, "workers", "9", &fe), -EEXIST, "a flag given twice");
    TAP_OK(strstr(fe.msg, "workers") != NULL, "names the key");
    TAP_IS_INT(conf_set(&c3, "dataset.c", "/again", &fe), -EEXIST, "a dataset flag twice");
    TAP_IS_INT(conf_set(&c3, "wrokers", "9", &fe), -ENOENT, "an unknown flag key");
    TAP_IS_INT(conf_set(&c3, "memory-budget", "lots", &fe), -EINVAL, "a bad flag value");
    TAP_OK(strstr(fe.msg, "memory-budget") != NULL, "names the key");
    TAP_IS_INT(conf_is_set(&c3, CONF_MEMORY_BUDGET), 0, "a bad value sets nothing");
    TAP_IS_INT(conf_set(&c3, "log-level", "de\nbug", &fe), -EINVAL, "a control byte in a flag");

    TAP_IS_INT(conf_merge(&c, &c3, &fe), 0, "merge flags over file");
    TAP_IS_INT(c.workers, 8, "flag workers wins");
    TAP_IS_STR(c.socket, "/run/file.sock", "file socket kept (flag unset)");
    TAP_IS_INT(c.log_level, CONF_LOG_WARN, "file log level kept (flag unset)");
    TAP_IS_INT(c.n_datasets, 3, "datasets: a, b replaced, c added");
    TAP_IS_STR(conf_find_dataset(&c, "a")->dir, "/file/a", "a from the file");
    TAP_IS_STR(conf_find_dataset(&c, "b")->dir, "/flag/b", "b from the flag");
    TAP_IS_STR(conf_find_dataset(&c, "c")->dir, "/flag/c", "c from the flag");
    TAP_OK(conf_is_set(&c, CONF_WORKERS) && conf_is_set(&c, CONF_SOCKET) &&
               !conf_is_set(&c, CONF_MEMORY_BUDGET),
           "set bits: union of both");

    /* --workers auto over a file's count, and a count over a file's auto */
    expect_ok("workers = 4\n", "a file with workers = 4");
    conf_defaults(&c3);
    TAP_IS_INT(conf_set(&c3, "workers", "auto", &fe), 0, "flag --workers auto");
    TAP_IS_INT(conf_set(&c3, "cpu-budget", "3", &fe), 0, "flag --cpu-budget 3");
    conf_merge(&c, &c3, &fe);
    TAP_OK(c.workers_auto && c.workers == 0 && c.cpu_budget == 3,
           "--workers auto --cpu-budget 3 win over workers = 4");
    expect_ok("workers = auto\n", "a file with workers = auto");
    conf_defaults(&c3);
    conf_set(&c3, "workers", "2", &fe);
    conf_merge(&c, &c3, &fe);
    TAP_OK(!c.workers_auto && c.workers == 2, "--workers 2 wins over workers = auto");
    TAP_IS_INT(conf_set(&c3, "cpu-budget", "0", &fe), -EINVAL, "flag --cpu-budget 0 refused");
    TAP_OK(strstr(fe.msg, "cpu-budget") && strstr(fe.msg, "1..256"), "naming the key and range");

    /* allow lists are replaced whole */
    conf_defaults(&c3);
    conf_set(&c3, "allow-uid", "7", &fe);
    c = c2;
    conf_set(&c, "allow-uid", "1,2,3", &fe);
    conf_merge(&c, &c3, &fe);
    TAP_OK(c.n_allow_uid == 1 && c.allow_uid[0] == 7, "allow list replaced whole");

    /* bound: 64 in the file plus one new flag dataset */
    {
        char name[32];

        conf_defaults(&c);
        for (int i = 0; i < CONF_DATASETS_MAX; i++) {
            snprintf(name, sizeof(name), "dataset.d%d", i);
            conf_set(&c, name, "/d", &fe);
        }
        c2 = c;
        conf_defaults(&c3);
        conf_set(&c3, "dataset.d5", "/new", &fe);
        TAP_IS_INT(conf_merge(&c, &c3, &fe), 0, "replacing within 64 is fine");
        conf_set(&c3, "dataset.new", "/new", &fe);
        c = c2;
        TAP_IS_INT(conf_merge(&c, &c3, &fe), -E2BIG, "the 65th dataset by flag is refused");
        TAP_OK(conf_equal(&c, &c2), "a refused merge changes nothing");
    }
}

static void test_format(void)
{
    char buf[1 << 16];
    int n;

    expect_ok("socket = /run/a b.sock\ndataset.x = /d x\ndataset.y = /e\nworkers = 3\n"
              "memory-budget = 1536M\nlog-level = error\nallow-uid = 5, 6\n"
              "allow-gid = 0\nwatchdog-sec = 0\nmax-bad-samples = 18446744073709551615\n"
              "pixel-cap = 4294967296\nsocket-mode = 0606\nsocket-group = wheel\n"
              "weight = name:a=2, uid:7=3/9\nmax-weight = 4\n"
              "recipe.r = ColorJitter:brightness=0.4,RandomErasing\n",
              "a full config");
    n = conf_format(&c, buf, sizeof(buf));
    TAP_OK(n > 0 && conf_parse(buf, (size_t)n, &c2, &e) == 0 && conf_equal(&c, &c2),
           "format then parse gives the same config");
    TAP_OK(strstr(buf, "memory-budget = 1536M\n") != NULL, "sizes written with a suffix");
    TAP_OK(strstr(buf, "allow-uid = 5, 6\n") != NULL, "lists written with commas");
    TAP_OK(strstr(buf, "socket-mode = 0606\n") != NULL, "modes written in octal");
    TAP_OK(strstr(buf, "weight = name:a=2, uid:7=3/9\n") != NULL,
           "weight rules written with their /MAX when given");
    TAP_OK(strstr(buf, "recipe.r = ColorJitter:brightness=0.4,RandomErasing\n") != NULL,
           "recipes written as given");

    expect_ok("workers = auto\ncpu-budget = 6\n", "auto with a budget");
    n = conf_format(&c, buf, sizeof(buf));
    TAP_IS_STR(n > 0 ? buf : "", "workers = auto\ncpu-budget = 6\n", "written as auto");
    TAP_OK(conf_parse(buf, (size_t)n, &c2, &e) == 0 && conf_equal(&c, &c2) && c2.workers_auto,
           "and read back as auto");

    expect_ok("memory-budget = 1048577\n", "an odd budget");
    n = conf_format(&c, buf, sizeof(buf));
    TAP_IS_STR(n > 0 ? buf : "", "memory-budget = 1048577\n", "only set keys are written");
    TAP_IS_INT(conf_format(&c, buf, 10), -ENOSPC, "format past cap");

    expect_ok("", "empty");
    TAP_IS_INT(conf_format(&c, buf, sizeof(buf)), 0, "nothing set: empty text");

    /* conf_equal notices every kind of difference */
    expect_ok("workers = 3\ndataset.x = /d\nallow-gid = 1\n", "base");
    c2 = c;
    TAP_OK(conf_equal(&c, &c2), "equal to a copy");
    c2.workers = 4;
    TAP_OK(!conf_equal(&c, &c2), "workers differ");
    c2 = c;
    c2.workers_auto = true;
    TAP_OK(!conf_equal(&c, &c2), "auto or not differs");
    c2 = c;
    c2.cpu_budget = 2;
    TAP_OK(!conf_equal(&c, &c2), "cpu budgets differ");
    c2 = c;
    c2.datasets[0].dir[1] = 'e';
    TAP_OK(!conf_equal(&c, &c2), "a dataset dir differs");
    c2 = c;
    c2.allow_gid[0] = 2;
    TAP_OK(!conf_equal(&c, &c2), "an allowed gid differs");
    c2 = c;
    c2.max_weight = 2;
    TAP_OK(!conf_equal(&c, &c2), "max-weight differs");
    c2 = c;
    c2.set |= 1u << CONF_PIXEL_CAP;
    TAP_OK(!conf_equal(&c, &c2), "a set bit differs");
    c2 = c;
    c2.socket_mode = 0600;
    TAP_OK(!conf_equal(&c, &c2), "socket modes differ");
    c2 = c;
    snprintf(c2.socket_group, sizeof(c2.socket_group), "x");
    TAP_OK(!conf_equal(&c, &c2), "socket groups differ");
}

static void test_cpu_list(void)
{
    expect_ok("cpu-list = 3, 5 - 6 ,1023\n", "cpu-list: blanks around numbers and ranges");
    TAP_OK(c.cpu_list[0] == 0x68 && c.cpu_list[15] == 1ull << 63, "  CPUs 3, 5, 6 and 1023");
    for (unsigned i = 0; i < 4; i++) {
        static const char *const bad[] = {"cpu-list = 1024\n", "cpu-list = 5-3\n",
                                          "cpu-list = 1,,2\n", "cpu-list = a-b\n"};

        expect_bad(bad[i], "a bad cpu-list is refused naming the key and the form",
                   "cpu-list", "ranges A-B", NULL);
    }
    {
        char buf[4096];
        int n;

        expect_ok("cpu-list = 7,1-3,5,1023,4\n", "cpu-list: any order");
        n = conf_format(&c, buf, sizeof(buf));
        TAP_IS_STR(n > 0 ? buf : "", "cpu-list = 1-5,7,1023\n", "cpu-list: written canonical");
        TAP_OK(n > 0 && conf_parse(buf, (size_t)n, &c2, &e) == 0 && conf_equal(&c, &c2),
               "cpu-list: and read back the same");
        c2.cpu_list[0] ^= 1;
        TAP_OK(!conf_equal(&c, &c2), "cpu-list: lists differ");
    }
}

/* numa-node: a node number, 0 a node like any other; none by default */
static void test_numa_node(void)
{
    char buf[4096];
    int n;

    expect_ok("", "numa-node: not set");
    TAP_IS_INT(conf_numa_node(&c), -1, "numa-node: none by default");
    one("numa-node", "0", 1);
    TAP_IS_INT(conf_numa_node(&c), 0, "numa-node = 0 is node 0");
    one("numa-node", "1023", 1);
    TAP_IS_INT(conf_numa_node(&c), 1023, "numa-node = 1023, the largest");
    one("numa-node", " 3 ", 1);
    TAP_IS_INT(conf_numa_node(&c), 3, "numa-node: blanks around the number");
    n = conf_format(&c, buf, sizeof(buf));
    TAP_IS_STR(n > 0 ? buf : "", "numa-node = 3\n", "numa-node: written back");
    TAP_OK(n > 0 && conf_parse(buf, (size_t)n, &c2, &e) == 0 && conf_equal(&c, &c2),
           "numa-node: and read back the same");
    expect_ok("numa-node = 0\n", "numa-node = 0");
    expect_ok("", "no numa-node");
    c2 = c;
    expect_ok("numa-node = 0\n", "numa-node = 0 again");
    TAP_OK(!conf_equal(&c, &c2), "numa-node: node 0 and none differ (the set bit says)");
    for (unsigned i = 0; i < 6; i++) {
        static const char *const bad[] = {"1024", "-1", "0x1", "node0", "", "0,1"};

        one("numa-node", bad[i], 0);
    }
    expect_bad("numa-node = 1024\n", "numa-node: the message says the range", "numa-node",
               "0..1023", NULL);
    expect_bad("numa-node = 0\nnuma-node = 1\n", "numa-node: given twice is refused",
               "numa-node", "twice", NULL);
    conf_defaults(&c3);
    TAP_IS_INT(conf_set(&c3, "numa-node", "2", &e), 0, "numa-node: set as a flag would");
    expect_ok("numa-node = 1\n", "numa-node: the file");
    TAP_IS_INT(conf_merge(&c, &c3, &e), 0, "numa-node: merged");
    TAP_IS_INT(conf_numa_node(&c), 2, "numa-node: the later layer wins");
}

/* Remote datasets and the cache and fetch keys. */
static void test_remote(void)
{
    char buf[4096];
    int n;

    expect_ok("", "remote keys: not set");
    TAP_IS_STR(c.cache_dir, CONF_DEFAULT_CACHE_DIR, "cache-dir's default");
    TAP_IS_INT(c.cache_size, CONF_DEFAULT_CACHE_SIZE, "cache-size's default, 64G");
    TAP_IS_INT(c.fetch_retries, CONF_DEFAULT_FETCH_RETRIES, "fetch-retries' default");
    TAP_IS_INT(c.cache_evict, CONF_EVICT_BELADY, "cache-evict's default, belady");
    TAP_OK(c.s3_endpoint[0] == '\0' && c.s3_region[0] == '\0', "no s3-endpoint, no s3-region");
    one("dataset.a", "http://127.0.0.1:8080/pack/", 1);
    one("dataset.a", "https://[::1]/p", 1);
    one("dataset.a", "s3://bucket-1", 1);
    expect_bad("dataset.a = /ok\ndataset.b = https://host/a//b/\n",
               "a bad dataset URL names the line, the key and the byte", "line 2", "dataset.b",
               "byte", NULL);
    expect_bad("dataset.b = ftp://host/x\n", "an unknown scheme is refused", "line 1",
               "dataset.b", NULL);
    expect_bad("dataset.b = s3://AB/x\n", "a bad bucket is refused", "line 1", "dataset.b",
               NULL);
    one("dataset.a", "relative/dir", 0);
    one("cache-dir", "/srv/cache", 1);
    one("cache-dir", "cache", 0);
    one("cache-size", "1M", 1);
    one("cache-size", "2T", 1);
    one("cache-size", "1K", 0);
    one("cache-size", "lots", 0);
    one("s3-endpoint", "http://127.0.0.1:9000", 1);
    one("s3-endpoint", "https://minio.example.org/", 1);
    one("s3-endpoint", "https://minio.example.org/path", 0);
    one("s3-endpoint", "s3://bucket", 0);
    one("s3-endpoint", "minio:9000", 0);
    one("s3-region", "us-east-1", 1);
    one("s3-region", "US-EAST-1", 0);
    one("s3-region", "us east", 0);
    one("s3-region", "a123456789012345678901234567890123456789012345678901234567890123", 0);
    one("fetch-retries", "0", 1);
    one("fetch-retries", "20", 1);
    one("fetch-retries", "21", 0);
    one("cache-evict", "belady", 1);
    one("cache-evict", "lru", 1);
    one("cache-evict", "fifo", 0);
    expect_bad("cache-evict = LRU\n", "cache-evict: the message names the values",
               "cache-evict", "belady, lru", NULL);
    expect_bad("fetch-retries = 21\n", "fetch-retries: the message says the range",
               "fetch-retries", "0..20", NULL);
    expect_ok("dataset.w = https://h.example/p/\ncache-dir = /c\ncache-size = 3G\n"
              "s3-endpoint = http://[::1]:9000\ns3-region = eu-west-1\nfetch-retries = 0\n",
              "every remote key at once");
    n = conf_format(&c, buf, sizeof(buf));
    TAP_OK(n > 0 && strstr(buf, "dataset.w = https://h.example/p/\n") &&
           strstr(buf, "cache-size = 3G\n") && strstr(buf, "s3-endpoint = http://[::1]:9000\n"),
           "remote keys: written back");
    TAP_OK(n > 0 && conf_parse(buf, (size_t)n, &c2, &e) == 0 && conf_equal(&c, &c2),
           "remote keys: and read back the same");
    c2.fetch_retries = 1;
    TAP_OK(!conf_equal(&c, &c2), "remote keys: fetch-retries differ");
    conf_defaults(&c3);
    TAP_IS_INT(conf_set(&c3, "s3-region", "ap-south-1", &e), 0, "s3-region: set as a flag");
    TAP_IS_INT(conf_merge(&c, &c3, &e), 0, "s3-region: merged");
    TAP_IS_STR(c.s3_region, "ap-south-1", "s3-region: the later layer wins");
}

int main(void)
{
    test_table_and_defaults();
    test_example();
    test_keys();
    test_syntax();
    test_size();
    test_flags_merge();
    test_format();
    test_caps();
    test_cpu_list();
    test_numa_node();
    test_remote();
    return tap_done();
}
