/*
 * pkgconfig_client.c - the smallest program a user writes against an
 * installed libringfeed: built with `pkg-config --cflags --libs ringfeed`
 * by the install tests (tests/integration/test_service.py for meson
 * install, tests/package/test_debian.py for the Debian packages) to show
 * the header, the pkg-config file and the library fit together.  Exits 0.
 */
#include <stddef.h>
#include <ringfeed.h>

int main(int argc, char **argv)
{
    struct rf_client *c = NULL;

    (void)argv;
    if (argc > 99 && rf_open(NULL, &c) == 0)
        rf_close(c);
    return 0;
}
