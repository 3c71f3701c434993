@ Hand-written ARM (ARMv4T) control flow for the WCET analyzer's tests:
@ conditional returns, a tail call, a jump into another function's tail,
@ a literal pool, a predicated loop as in libgcc's soft-float, a linker
@ veneer to far code and an irreducible loop.
        .syntax unified
        .arm
        .text

        .global entry
        .type entry, %function
entry:
        push    {r4, lr}
        bl      condret
        bl      tailer
        bl      sharer
        bl      pool
        bl      normalise
        bl      far_away            @ the linker routes this through a long-branch veneer
        pop     {r4, lr}
        bx      lr
        .size entry, .-entry

@ bxeq lr, popne {.., pc} and ldmfdne sp!, {.., pc}: three conditional returns
        .global condret
        .type condret, %function
condret:
        cmp     r0, #0
        bxeq    lr
        push    {r4, lr}
        add     r0, r0, #1
        cmp     r0, #5
        popne   {r4, pc}
        add     r0, r0, #2
        add     r0, r0, #3
        cmp     r0, #9
        ldmfdne sp!, {r4, pc}
        mul     r0, r0, r0
        pop     {r4, pc}
        .size condret, .-condret

@ a tail call: b to another function
        .global tailer
        .type tailer, %function
tailer:
        add     r0, r0, #1
        add     r0, r0, #1
        b       condret
        .size tailer, .-tailer

@ owner's second half is also reached from sharer (libgcc's shared tails)
        .global owner
        .type owner, %function
owner:
        add     r0, r0, #1
owner_tail:
        add     r0, r0, r0
        add     r0, r0, #3
        add     r0, r0, #4
        bx      lr
        .size owner, .-owner

        .global sharer
        .type sharer, %function
sharer:
        cmp     r0, #0
        beq     owner_tail
        mov     r0, #7
        bx      lr
        .size sharer, .-sharer

@ constants in a literal pool ($d) inside the function, after its return
        .global pool
        .type pool, %function
pool:
        ldr     r0, =0x12345678
        ldr     r1, =0xe12fff1e             @ a "bx lr" as data: never decoded
        add     r0, r0, r1
        bx      lr
        .ltorg
        .size pool, .-pool

@ libgcc's denormal normalisation: a loop of predicated instructions
        .global normalise
        .type normalise, %function
normalise:
        teq     r2, #0
        and     ip, r0, #0x80000000
1:      lsleq   r0, r0, #1
        tsteq   r0, #0x00800000
        subeq   r2, r2, #1
        beq     1b
        orr     r0, r0, ip
        bx      lr
        .size normalise, .-normalise

@ a cycle entered at two places: 1 and 2 (irreducible)
        .global irreducible
        .type irreducible, %function
irreducible:
        cmp     r0, #0
        beq     2f
1:      sub     r1, r1, #1
2:      subs    r2, r2, #1
        bne     1b
        bx      lr
        .size irreducible, .-irreducible

        .section .far, "ax", %progbits
        .global far_away
        .type far_away, %function
far_away:
        add     r0, r0, #1
        bx      lr
        .size far_away, .-far_away
