// The unit tests' random numbers: splitmix64 over one global state, so a test's cases repeat from
// the seed it prints. Needs rng_state seeded by the test; guarantees the same sequence for a seed
// on every machine.
#ifndef ORCH_TEST_RNG_H
#define ORCH_TEST_RNG_H

#include <stdint.h>

static uint64_t rng_state;

static inline uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Uniform in [lo, hi).
static inline double unif(double lo, double hi) {
    return lo + (hi - lo) * (double)(rnd() >> 11) / 9007199254740992.0;
}

#endif
