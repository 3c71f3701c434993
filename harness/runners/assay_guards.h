/* Assay guard words: the buffers a driver hands to the generated code, with canaries around them.
 *
 * Included by batch_driver.c (host) and target_driver.c (ARM targets, and the
 * host's sanitized executable), after ASSAY_IN and ASSAY_OUT are defined.
 *
 * Why: an output comparison cannot see a write one past the output buffer or
 * into the next input's slot (the next call overwrites it), yet such C is
 * wrong. Each driver therefore copies every input into assay_input.data and
 * lets the entry write into assay_output.data; ASSAY_GUARD_WORDS words before
 * and after each hold ASSAY_GUARD_BITS, and the driver checks them after every
 * call. ASSAY_GUARD_BITS is a quiet NaN with a payload: a read past the input
 * reads a NaN, which poisons the outputs the oracle sees.
 *
 * Under AddressSanitizer (gcc defines __SANITIZE_ADDRESS__) the guard words are
 * poisoned instead, so any read or write of them is reported at the faulting
 * instruction; the check after the call is then not needed (and would itself
 * be reported).
 */
#ifndef ASSAY_GUARDS_H
#define ASSAY_GUARDS_H

#include <stdint.h>
#include <string.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

#define ASSAY_GUARD_WORDS 16
#define ASSAY_GUARD_BITS 0x7FC0A55Au

/* Which guard word was found damaged; kept in step with GUARDS in harness/runners/host.py and
 * the message target_driver.c prints (harness/runners/qemu.py reads it). */
#define ASSAY_GUARD_INTACT 0
#define ASSAY_GUARD_BEFORE_INPUT 1
#define ASSAY_GUARD_AFTER_INPUT 2
#define ASSAY_GUARD_BEFORE_OUTPUT 3
#define ASSAY_GUARD_AFTER_OUTPUT 4

/* aligned(8): the data starts on an AddressSanitizer granule, so the whole guard before it can be poisoned. */
static struct {
    uint32_t before[ASSAY_GUARD_WORDS];
    float data[ASSAY_IN];
    uint32_t after[ASSAY_GUARD_WORDS];
} __attribute__((aligned(8))) assay_input;

static struct {
    uint32_t before[ASSAY_GUARD_WORDS];
    float data[ASSAY_OUT];
    uint32_t after[ASSAY_GUARD_WORDS];
} __attribute__((aligned(8))) assay_output;

static void assay_guard_fill(uint32_t *words)
{
    for (int i = 0; i < ASSAY_GUARD_WORDS; ++i) {
        words[i] = ASSAY_GUARD_BITS;
    }
#ifdef __SANITIZE_ADDRESS__
    ASAN_POISON_MEMORY_REGION(words, ASSAY_GUARD_WORDS * sizeof words[0]);
#endif
}

/* Fill the four guards; once per run, before the first call. */
static void assay_guards_arm(void)
{
    assay_guard_fill(assay_input.before);
    assay_guard_fill(assay_input.after);
    assay_guard_fill(assay_output.before);
    assay_guard_fill(assay_output.after);
}

static int assay_guard_intact(const volatile uint32_t *words)
{
#ifndef __SANITIZE_ADDRESS__
    for (int i = 0; i < ASSAY_GUARD_WORDS; ++i) {
        if (words[i] != ASSAY_GUARD_BITS) {
            return 0;
        }
    }
#else
    (void)words;
#endif
    return 1;
}

/* ASSAY_GUARD_INTACT, or the first damaged guard; after every call. */
static int assay_guards_damaged(void)
{
    if (!assay_guard_intact(assay_input.before)) {
        return ASSAY_GUARD_BEFORE_INPUT;
    }
    if (!assay_guard_intact(assay_input.after)) {
        return ASSAY_GUARD_AFTER_INPUT;
    }
    if (!assay_guard_intact(assay_output.before)) {
        return ASSAY_GUARD_BEFORE_OUTPUT;
    }
    if (!assay_guard_intact(assay_output.after)) {
        return ASSAY_GUARD_AFTER_OUTPUT;
    }
    return ASSAY_GUARD_INTACT;
}

#endif
