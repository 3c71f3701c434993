@ Frame-slot counters that wcet.binloops must refuse (tests/wcet/test_binloops.py). Every function has the
@ -O0 shape of `for (i = 0; i < 10; i++)` with i at [r7, #4] (entry sp - 20), and one instruction (marked) that
@ writes the slot, or may, in a way the recogniser must see; `plain` has none and is bounded. Thumb-2.
        .syntax unified
        .thumb
        .text

        .macro  prologue name
        .global \name
        .type   \name, %function
        .thumb_func
\name:
        push    {r7, lr}
        sub     sp, #16
        add     r7, sp, #0
        movs    r3, #0
        str     r3, [r7, #4]
        b       2f
1:
        .endm

        .macro  loop_end name           @ the test `i <= 9`, the back edge and the return
2:      ldr     r3, [r7, #4]
        cmp     r3, #9
        ble     1b
        adds    r7, #16
        mov     sp, r7
        pop     {r7, pc}
        .size   \name, .-\name
        .endm

        .macro  epilogue name           @ the increment `i++`, then loop_end
        ldr     r3, [r7, #4]
        adds    r3, #1
        str     r3, [r7, #4]
        loop_end \name
        .endm

        prologue plain
        nop
        epilogue plain

        prologue strd_over
        movs    r0, #0
        movs    r1, #0
        strd    r0, r1, [r7, #0]        @ marked: writes [r7, #0] .. [r7, #8), the slot's upper half included
        epilogue strd_over

        prologue stm_over
        add     r2, r7, #0
        stm     r2, {r0, r1}            @ marked: store-multiple over the slot
        epilogue stm_over

        prologue byte_over
        movs    r0, #0
        strb    r0, [r7, #5]            @ marked: one byte of the slot
        epilogue byte_over

        prologue derived
        ldr     r0, =data
        ldr     r0, [r0]
        add     r2, r7, #4
        add     r2, r2, r0
        str     r1, [r2]                @ marked: through the slot's address plus an unknown offset
        epilogue derived

        prologue to_memory
        add     r2, r7, #4
        ldr     r0, =data
        str     r2, [r0]                @ marked: the slot's address stored to memory
        epilogue to_memory

        prologue frame_rewritten
        ldr     r0, =data
        ldr     r7, [r0]                @ marked: the frame pointer loaded from memory inside the loop
        epilogue frame_rewritten

        prologue stack_unknown
        ldr     r0, =data
        ldr     r0, [r0]
        sub     sp, sp, r0              @ marked: an alloca of unknown size,
        str     r1, [sp]                @ then a store through sp
        epilogue stack_unknown

        prologue conditional_step       @ the same loop, but its increment is predicated
        ldr     r0, =data
        ldr     r0, [r0]
        cmp     r0, #0
        ldr     r3, [r7, #4]
        add     r3, r3, #1
        it      ne
        strne   r3, [r7, #4]            @ marked: the increment may not happen
        loop_end conditional_step

        .global entry
        .type   entry, %function
        .thumb_func
entry:
        bx      lr
        .size   entry, .-entry

        .data
data:   .word   0
