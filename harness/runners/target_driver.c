/* Assay target driver (ARM under QEMU, semihosting).
 *
 * The program's main: it runs the generated inference function on every input
 * of a batch in one emulator start. Compiled with the generated sources and
 * -DASSAY_ENTRY=<symbol> -DASSAY_IN=<floats> -DASSAY_OUT=<floats> taken from
 * the generation manifest.
 *
 * Protocol (docs/targets.md):
 *   - inputs file: raw little-endian float32, N * ASSAY_IN values, no header;
 *     N is the file size divided by 4 * ASSAY_IN. It is read one input at a
 *     time, so RAM use does not grow with N.
 *   - outputs file: raw little-endian float32, N * ASSAY_OUT values, in input order.
 *   - paths: argv[1] and argv[2] when given (QEMU user mode), else the fixed
 *     names below, relative to the emulator's working directory (QEMU system
 *     mode has no argv). Files are opened through semihosting (newlib rdimon or
 *     picolibc semihost), i.e. on the build machine.
 *   - exit status: 0 when every output was written; the ASSAY_EXIT_* codes
 *     below for I/O errors; 134 when the generated code calls abort();
 *     ASSAY_EXIT_GUARD when a guard word around the input or output buffer was
 *     overwritten (assay_guards.h), after printing "assay: guard word <where>
 *     overwritten at call #<k>".
 *
 * Built for the host with -fsanitize=address,undefined, the same main is the
 * sanitized executable of harness/runners/sanitized.py.
 *
 * Stack measurement (docs/memory.md): compiled with -DASSAY_STACK_PAINT=<bytes>,
 * main fills that many bytes below its stack pointer with a pattern before
 * each call of the entry, and after the call finds the lowest word that no
 * longer holds it. The largest depth over the batch (bytes below main's sp at
 * the call, i.e. what the entry and its callees used) goes to ASSAY_STACK_FILE
 * as three little-endian uint32: depth, painted bytes, number of calls. The
 * painting and the scan are inline in main, whose frame lies above the
 * painted area, so they do not disturb what they measure.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>

#include "assay_guards.h"

#define ASSAY_INPUTS_FILE "assay_inputs.f32"
#define ASSAY_OUTPUTS_FILE "assay_outputs.f32"

/* Kept in step with EXIT_CAUSES in harness/runners/qemu.py. */
#define ASSAY_EXIT_OPEN_INPUTS 70
#define ASSAY_EXIT_OPEN_OUTPUTS 71
#define ASSAY_EXIT_READ 72
#define ASSAY_EXIT_PARTIAL_INPUT 73
#define ASSAY_EXIT_WRITE 74
#define ASSAY_EXIT_ABORT 134 /* 128 + SIGABRT, as a shell reports it */
#define ASSAY_EXIT_STACK_FILE 75 /* could not write ASSAY_STACK_FILE */
#define ASSAY_EXIT_STACK_MOVED 76 /* main's sp differs after the call: the depth would be wrong */
#define ASSAY_EXIT_GUARD 77 /* a guard word around the input or output buffer was overwritten */

#ifdef ASSAY_STACK_PAINT
#define ASSAY_STACK_FILE "assay_stack.u32"
#define ASSAY_STACK_PATTERN 0xA5C3E1F7u /* odd, not a float of any layer, not an address */
#define ASSAY_READ_SP(var) __asm__ volatile("mov %0, sp" : "=r"(var))
#endif

void ASSAY_ENTRY(const float *input, float *output);

static const char *const assay_guard_names[] = {"", "before input", "after input", "before output", "after output"};

static void assay_on_abort(int sig)
{
    (void)sig;
    _Exit(ASSAY_EXIT_ABORT);
}

int main(int argc, char **argv)
{
    const char *in_path = argc > 2 ? argv[1] : ASSAY_INPUTS_FILE;
    const char *out_path = argc > 2 ? argv[2] : ASSAY_OUTPUTS_FILE;
    FILE *in, *out;
    unsigned long call = 0;
#ifdef ASSAY_STACK_PAINT
    uint32_t stack_record[3] = {0, ASSAY_STACK_PAINT, 0}; /* depth, painted bytes, calls */
#endif

    signal(SIGABRT, assay_on_abort);
    assay_guards_arm();
    in = fopen(in_path, "rb");
    if (in == NULL) {
        return ASSAY_EXIT_OPEN_INPUTS;
    }
    out = fopen(out_path, "wb");
    if (out == NULL) {
        return ASSAY_EXIT_OPEN_OUTPUTS;
    }
    for (;;) {
        size_t got = fread(assay_input.data, sizeof(float), ASSAY_IN, in);
        if (got == 0 && feof(in)) {
            break;
        }
        if (got != ASSAY_IN) {
            return ferror(in) ? ASSAY_EXIT_READ : ASSAY_EXIT_PARTIAL_INPUT;
        }
        /* NaN in every output the entry does not write, as the host driver does. */
        for (size_t i = 0; i < ASSAY_OUT; ++i) {
            assay_output.data[i] = __builtin_nanf("");
        }
#ifdef ASSAY_STACK_PAINT
        {
            uintptr_t sp_before, sp_after;
            volatile uint32_t *word;
            ASSAY_READ_SP(sp_before);
            for (word = (volatile uint32_t *)(sp_before - ASSAY_STACK_PAINT); (uintptr_t)word < sp_before; ++word) {
                *word = ASSAY_STACK_PATTERN;
            }
            ASSAY_ENTRY(assay_input.data, assay_output.data);
            ASSAY_READ_SP(sp_after);
            if (sp_after != sp_before) {
                return ASSAY_EXIT_STACK_MOVED;
            }
            for (word = (volatile uint32_t *)(sp_before - ASSAY_STACK_PAINT);
                 (uintptr_t)word < sp_before && *word == ASSAY_STACK_PATTERN; ++word) {
            }
            if (sp_before - (uintptr_t)word > stack_record[0]) {
                stack_record[0] = (uint32_t)(sp_before - (uintptr_t)word);
            }
            ++stack_record[2];
        }
#else
        ASSAY_ENTRY(assay_input.data, assay_output.data);
#endif
        {
            int damaged = assay_guards_damaged();
            if (damaged != ASSAY_GUARD_INTACT) {
                printf("assay: guard word %s overwritten at call #%lu\n", assay_guard_names[damaged], call);
                return ASSAY_EXIT_GUARD;
            }
        }
        ++call;
        if (fwrite(assay_output.data, sizeof(float), ASSAY_OUT, out) != ASSAY_OUT) {
            return ASSAY_EXIT_WRITE;
        }
    }
    if (fclose(out) != 0) {
        return ASSAY_EXIT_WRITE;
    }
    fclose(in);
#ifdef ASSAY_STACK_PAINT
    {
        FILE *stack = fopen(ASSAY_STACK_FILE, "wb");
        if (stack == NULL || fwrite(stack_record, sizeof stack_record[0], 3, stack) != 3 || fclose(stack) != 0) {
            return ASSAY_EXIT_STACK_FILE;
        }
    }
#endif
    return 0;
}
