/* Burner for the Parca Agent capture (issue 28): one thread burns CPU in two functions with a
 * known split. Both run the same loop body; burn_three_quarters runs it three times as many
 * iterations as burn_one_quarter, so a sampling profiler should see about 3:1 between them
 * (by work done, not by wall clock, so a loaded machine does not skew the split).
 * Build: cc -g -O1 -o parca_burner parca_burner.c */
#include <stdint.h>

static volatile uint64_t sink;

static uint64_t burn(uint64_t state, int iterations)
{
    for (int i = 0; i < iterations; i++)
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state;
}

__attribute__((noinline)) void burn_three_quarters(void)
{
    sink = burn(sink, 30000000);
}

__attribute__((noinline)) void burn_one_quarter(void)
{
    sink = burn(sink, 10000000);
}

int main(void)
{
    for (;;) {
        burn_three_quarters();
        burn_one_quarter();
    }
}
