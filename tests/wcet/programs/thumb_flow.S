@ Hand-written Thumb-2 (Cortex-M4) control flow for the WCET analyzer's tests:
@ conditional returns in IT blocks, cbz, a tail call, a jump into another
@ function's tail, a literal pool.
        .syntax unified
        .thumb
        .text

        .global entry
        .type entry, %function
        .thumb_func
entry:
        push    {r4, lr}
        bl      condret
        bl      tailer
        bl      sharer
        bl      pool
        pop     {r4, pc}
        .size entry, .-entry

        .global condret
        .type condret, %function
        .thumb_func
condret:
        cbz     r0, 1f
        push    {r4, lr}
        adds    r0, r0, #1
        cmp     r0, #5
        it      ne
        popne   {r4, pc}
        adds    r0, r0, #2
        adds    r0, r0, #3
        cmp     r0, #9
        itt     eq
        addeq   r0, r0, #1
        popeq   {r4, pc}
        muls    r0, r0, r0
        pop     {r4, pc}
1:      cmp     r1, #0
        it      eq
        bxeq    lr
        adds    r0, r0, #4
        bx      lr
        .size condret, .-condret

        .global tailer
        .type tailer, %function
        .thumb_func
tailer:
        adds    r0, r0, #1
        b.w     condret
        .size tailer, .-tailer

        .global owner
        .type owner, %function
        .thumb_func
owner:
        adds    r0, r0, #1
owner_tail:
        adds    r0, r0, r0
        adds    r0, r0, #3
        bx      lr
        .size owner, .-owner

        .global sharer
        .type sharer, %function
        .thumb_func
sharer:
        cmp     r0, #0
        beq     owner_tail
        movs    r0, #7
        bx      lr
        .size sharer, .-sharer

        .global pool
        .type pool, %function
        .thumb_func
pool:
        ldr     r0, =0x12345678
        ldr     r1, =0x47704770             @ "bx lr; bx lr" as data: never decoded
        adds    r0, r0, r1
        bx      lr
        .ltorg
        .size pool, .-pool
