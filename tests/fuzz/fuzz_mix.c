/*
 * fuzz_mix.c - fuzz target for proto/mix.h: mix_parse either refuses with
 * a message or gives 2..MIX_SOURCES_MAX distinct, non-empty names whose
 * shares sum to MIX_ONE; then 1,000 positions of the blended index stay
 * within one sample of the shares and mix_seek agrees with the walk.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mix.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mix m;
    struct mix_state st, st2;
    struct rf_err err = {{0}};
    uint64_t sum = 0;
    int r = mix_parse((const char *)data, size, &m, &err);

    if (r < 0) {
        if (r != -EINVAL || err.msg[0] == '\0')
            abort();
        return 0;
    }
    if (m.n < 2 || m.n > MIX_SOURCES_MAX)
        abort();
    for (uint32_t i = 0; i < m.n; i++) {
        if (!m.s[i].name[0] || m.s[i].share == 0)
            abort();
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(m.s[i].name, m.s[j].name) == 0)
                abort();
        sum += m.s[i].share;
    }
    if (sum != MIX_ONE)
        abort();
    mix_start(&m, &st);
    for (int p = 0; p < 1000; p++) {
        mix_next(&m, &st, NULL);
        for (uint32_t i = 0; i < m.n; i++) {
            __int128 d = (__int128)st.c[i] * MIX_ONE - (__int128)m.s[i].share * st.p;

            if (d > (__int128)MIX_ONE || d < -(__int128)MIX_ONE)
                abort();
        }
    }
    mix_seek(&m, &st2, 1000);
    if (memcmp(&st, &st2, sizeof(st)) != 0)
        abort();
    return 0;
}
