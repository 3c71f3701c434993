/* Reset code of the cortex-a15x4 target (QEMU virt, 4 x Cortex-A15, bare metal).
 *
 * assay_reset is the ELF entry point. Every core enables its VFP (CPACR grants
 * cp10/cp11, FPEXC.EN set): the generated code is hard-float. Core 0 then
 * continues in picolibc's semihosting crt0 (_start: .data, .bss, main). Any
 * other core, whether QEMU started it at the entry or PSCI CPU_ON sent it to
 * assay_secondary, takes its own stack (ASSAY_SMP_STACK bytes per core in
 * assay_smp_stacks, defined by the driver) and runs assay_secondary_main(core),
 * which never returns.
 */
    .syntax unified
    .arm
    .text

    .global assay_reset
    .type assay_reset, %function
assay_reset:
    bl assay_enable_vfp
    mrc p15, 0, r0, c0, c0, 5      /* MPIDR */
    and r0, r0, #0xff              /* Aff0: the core number on virt */
    cmp r0, #0
    beq _start
    b assay_secondary_stack

    .global assay_secondary
    .type assay_secondary, %function
assay_secondary:                   /* PSCI CPU_ON entry, r0 = context id (unused) */
    bl assay_enable_vfp
    mrc p15, 0, r0, c0, c0, 5
    and r0, r0, #0xff
assay_secondary_stack:
    ldr r1, =assay_smp_stacks
    ldr r2, =assay_smp_stack_size
    ldr r2, [r2]
    add r3, r0, #1
    mul r3, r3, r2
    add sp, r1, r3                 /* top of core r0's stack: stacks + (core + 1) * size */
    bic sp, sp, #7
    bl assay_secondary_main
1:  wfe
    b 1b

    .type assay_enable_vfp, %function
assay_enable_vfp:
    mrc p15, 0, r1, c1, c0, 2      /* CPACR */
    orr r1, r1, #(0xf << 20)       /* cp10, cp11: full access */
    mcr p15, 0, r1, c1, c0, 2
    isb
    mov r1, #0x40000000            /* FPEXC.EN */
    vmsr fpexc, r1
    bx lr
