@ Input the analyzer must refuse, each with a one-line error naming the address.
        .syntax unified
        .text

@ Thumb code whose symbol lacks the Thumb bit (the label is defined in ARM
@ state): the mapping symbol says Thumb, the symbol says ARM.
        .arm
        .global mismatched
        .type mismatched, %function
mismatched:
        .thumb
        adds    r0, r0, #1
        bx      lr
        .size mismatched, .-mismatched

        .arm
@ CLZ is ARMv5: no ARM7TDMI timing.
        .global armv5
        .type armv5, %function
armv5:
        .inst   0xe16f0f10              @ clz r0, r0 (ARMv5)
        bx      lr
        .size armv5, .-armv5

@ bytes capstone cannot decode, in ARM code
        .global undecodable
        .type undecodable, %function
undecodable:
        add     r0, r0, #1
        .inst   0xffffffff
        bx      lr
        .size undecodable, .-undecodable

@ a jump through a register nobody knows
        .global indirect
        .type indirect, %function
indirect:
        ldr     r3, [r0]
        bx      r3
        .size indirect, .-indirect
