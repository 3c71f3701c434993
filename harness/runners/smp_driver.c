/* Assay driver for parallel code on bare-metal SMP ARM (QEMU virt, cortex-a15x4; semihosting I/O).
 *
 * Core 0 runs main: it starts cores 1..ASSAY_CORES-1 with PSCI CPU_ON (hvc
 * conduit, function 0x84000003, entry assay_secondary in
 * toolchains/cortex-a15x4-start.S), then for every input of the batch
 * publishes the input and output pointers, bumps the generation counter
 * `assay_go`, runs core 0's function itself and waits until every other core
 * has reported the generation in `assay_done[core]`. Cores 1..n-1 loop in
 * assay_secondary_main: wait for a new generation, run their function, report.
 * All shared words are volatile and fenced with __sync_synchronize() (dmb).
 *
 * Files, through semihosting as target_driver.c does (docs/targets.md):
 * assay_inputs.f32 in, assay_outputs.f32 out; with -DASSAY_TRACE the trace
 * lines of parallel_common.h go to assay_trace.txt; with -DASSAY_DELAYS the
 * delay seed is read from assay_seed.txt (a decimal number; 1 without it).
 * A sequential build (-DASSAY_SEQUENTIAL, ASSAY_CORES 1, ASSAY_FUNCTIONS the
 * V2 entry) runs the same loop on core 0 only, so both are compared on the
 * same compiler, library and emulator.
 * Exit status: 0, the target_driver.c codes for file errors, 77 when a core
 * could not be started (the PSCI error code is printed).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef ASSAY_SEQUENTIAL
#include ASSAY_HEADER
typedef void (*assay_core_function)(const float *input, float *output);
static const assay_core_function assay_functions[ASSAY_CORES] = {ASSAY_FUNCTIONS};
#else
#include "parallel_common.h"
#endif

#define ASSAY_EXIT_OPEN_INPUTS 70
#define ASSAY_EXIT_OPEN_OUTPUTS 71
#define ASSAY_EXIT_READ 72
#define ASSAY_EXIT_PARTIAL_INPUT 73
#define ASSAY_EXIT_WRITE 74
#define ASSAY_EXIT_CPU_ON 77
#define ASSAY_SMP_STACK 65536u /* bytes per secondary core */

#define PSCI_CPU_ON 0x84000003u

unsigned char assay_smp_stacks[ASSAY_CORES][ASSAY_SMP_STACK] __attribute__((aligned(16)));
const unsigned assay_smp_stack_size = ASSAY_SMP_STACK;
void assay_secondary(void);
void assay_secondary_main(int core);

static float assay_input[ASSAY_IN];
static float assay_output[ASSAY_OUT];
static volatile unsigned assay_go;
static volatile unsigned assay_done[ASSAY_CORES];

void assay_secondary_main(int core)
{
    unsigned seen = 0;
    for (;;) {
        while (assay_go == seen) {
        }
        __sync_synchronize();
        seen = assay_go;
        assay_functions[core](assay_input, assay_output);
        __sync_synchronize();
        assay_done[core] = seen;
    }
}

static int psci_cpu_on(unsigned cpu, unsigned entry, unsigned context)
{
    register unsigned r0 __asm__("r0") = PSCI_CPU_ON;
    register unsigned r1 __asm__("r1") = cpu;
    register unsigned r2 __asm__("r2") = entry;
    register unsigned r3 __asm__("r3") = context;
    __asm__ volatile(".arch_extension virt\n\thvc #0" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r3) : "memory");
    return (int)r0;
}

int main(void)
{
    FILE *in, *out;
#ifdef ASSAY_TRACE
    FILE *trace = fopen("assay_trace.txt", "w");
#endif
#ifdef ASSAY_DELAYS
    unsigned seed = 1u;
    FILE *seed_file = fopen("assay_seed.txt", "r");
    if (seed_file) {
        if (fscanf(seed_file, "%u", &seed) != 1) {
            seed = 1u;
        }
        fclose(seed_file);
    }
#endif
    for (unsigned core = 1; core < ASSAY_CORES; ++core) {
        const int status = psci_cpu_on(core, (unsigned)(size_t)assay_secondary, core);
        if (status != 0) {
            printf("PSCI CPU_ON of core %u failed: %d\n", core, status);
            return ASSAY_EXIT_CPU_ON;
        }
    }
    in = fopen("assay_inputs.f32", "rb");
    if (in == NULL) {
        return ASSAY_EXIT_OPEN_INPUTS;
    }
    out = fopen("assay_outputs.f32", "wb");
    if (out == NULL) {
        return ASSAY_EXIT_OPEN_OUTPUTS;
    }
    for (int run = 0;; ++run) {
        size_t got = fread(assay_input, sizeof(float), ASSAY_IN, in);
        if (got == 0 && feof(in)) {
            break;
        }
        if (got != ASSAY_IN) {
            return ferror(in) ? ASSAY_EXIT_READ : ASSAY_EXIT_PARTIAL_INPUT;
        }
        for (size_t i = 0; i < ASSAY_OUT; ++i) {
            assay_output[i] = __builtin_nanf("");
        }
#ifdef ASSAY_TRACE
        assay_reset_trace();
#endif
#ifdef ASSAY_DELAYS
        assay_seed_delays(seed, run);
#endif
        __sync_synchronize();
        const unsigned generation = assay_go + 1u;
        assay_go = generation;
        assay_functions[0](assay_input, assay_output);
        for (unsigned core = 1; core < ASSAY_CORES; ++core) {
            while (assay_done[core] != generation) {
            }
        }
        __sync_synchronize();
#ifdef ASSAY_TRACE
        assay_dump_trace(trace, run);
#endif
        if (fwrite(assay_output, sizeof(float), ASSAY_OUT, out) != ASSAY_OUT) {
            return ASSAY_EXIT_WRITE;
        }
    }
    if (fclose(out) != 0) {
        return ASSAY_EXIT_WRITE;
    }
    fclose(in);
#ifdef ASSAY_TRACE
    if (trace) {
        fclose(trace);
    }
#endif
    return 0;
}
