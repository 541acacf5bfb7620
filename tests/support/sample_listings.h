#pragma once
// Fixed SASS and PTX listings for the static report's parser tests (test_kernel_stats.cpp): each
// shows one shape the parser must read, with the counts its test expects written beside it.

namespace ropejit::sample_listings {

// nvdisasm -c style: an outer (grid-stride) loop .L_x_25 around the heads loop .L_x_24, then
// the self-branch trap and NOP padding that are never issued.
constexpr const char* kSass = R"(
	.section	.text.ropejit_rope,"ax",@progbits
ropejit_rope:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
.L_x_25:
        /*0010*/                   LDG.E.CONSTANT R8, desc[UR8][R18.64] ;
        /*0020*/                   F2F.F64.F32 R8, R8 ;
        /*0030*/                   DFMA R8, -R20, R14, R8 ;
.L_x_24:
        /*0040*/                   LDG.E.128 R12, desc[UR8][R42.64] ;
        /*0050*/                   LDG.E.128 R16, desc[UR8][R42.64+0x80] ;
        /*0060*/              @!P1 LDG.E.64.CONSTANT R4, desc[UR8][R2.64] ;
        /*0070*/                   SHF.L.U32 R44, R15, 0x10, RZ ;
        /*0080*/                   LDG.E.128 R20, desc[UR8][R42.64+0x100] ;
        /*0090*/                   ST.E.128 desc[UR8][R30.64], R12 ;
        /*00a0*/                   STG.E.64 desc[UR8][R30.64+0x80], R16 ;
        /*00b0*/                   STL [R1], R4 ;
        /*00c0*/               @P0 BRA `(.L_x_24) ;
        /*00d0*/               @P1 BRA `(.L_x_25) ;
        /*00e0*/                   EXIT ;
.L_x_26:
        /*00f0*/                   BRA `(.L_x_26);
        /*0100*/                   NOP;
)";

// cuobjdump -sass style: encodings after each instruction, branch targets as addresses.
constexpr const char* kCuobjdump = R"(
        code for sm_90
                Function : ropejit_rope
        /*0000*/                   S2R R0, SR_TID.X ;                  /* 0x0000000000007919 */
                                                                       /* 0x000e220000002100 */
        /*0010*/                   LDG.E.128 R12, desc[UR4][R2.64] ;    /* 0x0000000402087981 */
        /*0020*/               @P0 BRA 0x10 ;                          /* 0x0000000000008947 */
        /*0030*/               @P1 BRA 0x0 ;                           /* 0x0000000000008947 */
        /*0040*/                   EXIT ;                              /* 0x000000000000794d */
        /*0050*/                   BRA 0x50;                           /* 0xfffffffc00fc7947 */
)";

constexpr const char* kPtx = R"(
.visible .entry k(
	.param .align 8 .b8 k_param_0[296]
)
{
	.reg .b32 	%r<11>;
	ld.param.u64 	%rd2, [k_param_0+256];
$L__BB0_1:
	ld.global.nc.f32 	%f1, [%rd3];
	cvt.f64.f32 	%fd1, %f1;
	fma.rn.f64 	%fd2, %fd1, %fd1, %fd1;
$L__BB0_2:
	ld.global.v4.u32 	{%r1, %r2, %r3, %r4}, [%rd4];
	ld.global.v4.u32 	{%r5, %r6, %r7, %r8}, [%rd4+128];
	shl.b32 	%r9, %r2, 16;   // reads the first load
	st.v4.b32 [%rd5], {%r1, %r2, %r3, %r4};
	st.global.v2.u32 	[%rd6], {%r5, %r6};
	ld.local.u32 	%r10, [%rd7];
	@%p1 bra 	$L__BB0_2;
	@%p2 bra.uni 	$L__BB0_1;
	ret;
}
)";

// NVVM's PTX for a called function: its prototype, a call in the heads loop with each operand
// on its own line, and the body after the kernel.
constexpr const char* kPtxCall = R"(
.func  (.param .b32 func_retval0) _Z4softf
(
	.param .b32 _Z4softf_param_0
)
;
.visible .entry k(
	.param .align 8 .b8 k_param_0[296]
)
{
$L__BB0_1:
	ld.global.v4.u32 	{%r1, %r2, %r3, %r4}, [%rd4];
$L__BB0_2:
	{ // callseq 0, 0
	.param .b32 param0;
	st.param.f32 	[param0+0], %f1;
	.param .b32 retval0;
	call.uni (retval0), 
	_Z4softf, 
	(
	param0
	);
	ld.param.b32 	%r5, [retval0+0];
	} // callseq 0
	@%p1 bra 	$L__BB0_2;
	st.global.v4.u32 	[%rd5], {%r1, %r2, %r3, %r5};
	@%p2 bra.uni 	$L__BB0_1;
	ret;
}
.func  (.param .b32 func_retval0) _Z4softf(
	.param .b32 _Z4softf_param_0
)
{
	ld.param.f32 	%f2, [_Z4softf_param_0];
	mul.f32 	%f3, %f2, %f2;
	st.param.b32 	[func_retval0+0], %f3;
	ret;
}
)";

// A shuffle whose lanes may diverge: ptxas puts the divergent path after EXIT, returning into
// the heads loop with a backward branch that is no loop. A conditional EXIT stays inside one.
constexpr const char* kSassDivergentPath = R"(
ropejit_rope:
        /*0000*/                   S2R R0, SR_TID.X ;
.L_x_5:
        /*0010*/                   LDG.E.128 R12, desc[UR4][R2.64] ;
        /*0020*/               @P3 EXIT ;
.L_x_4:
        /*0030*/              @!P0 BRA.DIV UR9, `(.L_x_7) ;
        /*0040*/                   SHFL.BFLY PT, R22, R55, 0x4, 0x181f ;
.L_x_8:
        /*0050*/                   FADD R21, R55, R22 ;
        /*0060*/               @P1 BRA `(.L_x_4) ;
        /*0070*/               @P2 BRA `(.L_x_5) ;
        /*0080*/                   EXIT ;
.L_x_7:
        /*0090*/                   WARPSYNC.COLLECTIVE R19, `(.L_x_9) ;
        /*00a0*/                   SHFL.BFLY P0, R16, R18, R17, R16 ;
.L_x_9:
        /*00b0*/                   BRA `(.L_x_8) ;
)";

// A grid-stride loop around two inner loops: the heads loop (with a `continue`: two back branches
// to one label) and, after it, a 2-trip k/v store loop.
constexpr const char* kSassTwoInnerLoops = R"(
.L_x_0:
        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
.L_x_1:
        /*0010*/                   FFMA R8, R4, R5, R6 ;
        /*0020*/               @P0 BRA `(.L_x_1) ;
        /*0030*/                   FMUL R9, R8, R8 ;
        /*0040*/               @P1 BRA `(.L_x_1) ;
.L_x_2:
        /*0050*/                   F2FP.BF16.F32.PACK_AB R10, R9, R8 ;
        /*0060*/                   STG.E.128 desc[UR4][R2.64], R8 ;
        /*0070*/               @P2 BRA `(.L_x_2) ;
        /*0080*/               @P3 BRA `(.L_x_0) ;
        /*0090*/                   EXIT ;
)";

// A grid-stride loop holding a loop that fills shared memory without q/k/v accesses (a block's
// angles, 0x10..0x30), then a barrier and the heads loop (0x50..0x70).
constexpr const char* kSassAngleLoop = R"(
.L_x_0:
        /*0000*/                   S2R R0, SR_TID.X ;
.L_x_1:
        /*0010*/                   FMUL R1, R0, R0 ;
        /*0020*/                   STS [R2], R1 ;
        /*0030*/               @P0 BRA `(.L_x_1) ;
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
.L_x_2:
        /*0050*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0060*/                   STG.E.128 desc[UR4][R2.64], R4 ;
        /*0070*/               @P1 BRA `(.L_x_2) ;
        /*0080*/               @P2 BRA `(.L_x_0) ;
        /*0090*/                   EXIT ;
)";

// The same with a vector loop nested in the k/v store loop (a cache head's vectors, one a trip).
constexpr const char* kSassNestedInnerLoop = R"(
.L_x_0:
        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
.L_x_1:
        /*0010*/                   FFMA R8, R4, R5, R6 ;
        /*0020*/               @P0 BRA `(.L_x_1) ;
.L_x_2:
        /*0030*/                   FMUL R9, R8, R8 ;
.L_x_3:
        /*0040*/                   F2FP.BF16.F32.PACK_AB R10, R9, R8 ;
        /*0050*/               @P1 BRA `(.L_x_3) ;
        /*0060*/                   STG.E.128 desc[UR4][R2.64], R8 ;
        /*0070*/               @P2 BRA `(.L_x_2) ;
        /*0080*/               @P3 BRA `(.L_x_0) ;
        /*0090*/                   EXIT ;
)";

// A function called twice in the heads loop and once after it (nvdisasm's `$kernel$callee`
// label, RET at its end), and ptxas's guarded call into the kernel's own EXIT (no function).
constexpr const char* kSassCalls = R"(
.L_x_0:
        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
.L_x_1:
        /*0010*/                   CALL.REL.NOINC `($k$_Z4softffff) ;
        /*0020*/                   CALL.REL.NOINC `($k$_Z4softffff) ;
        /*0030*/               @P0 BRA `(.L_x_1) ;
        /*0040*/                   CALL.REL.NOINC `($k$_Z4softffff) ;
        /*0050*/                   STG.E.128 desc[UR4][R2.64], R8 ;
        /*0060*/               @P3 BRA `(.L_x_0) ;
        /*0070*/               @P1 CALL.REL.NOINC `(.L_x_2) ;
.L_x_2:
        /*0080*/                   EXIT ;
$k$_Z4softffff:
        /*0090*/                   FFMA R8, R4, R5, R6 ;
        /*00a0*/                   PRMT R9, R8, 0x40, R8 ;
        /*00b0*/                   RET.REL.NODEC R20 `(k) ;
)";

// A function called from another: the kernel's heads loop calls $k$outer (3 trips), which calls
// $k$inner once.
constexpr const char* kSassNestedCalls = R"(
.L_x_0:
        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
.L_x_1:
        /*0010*/                   CALL.REL.NOINC `($k$outer) ;
        /*0020*/               @P0 BRA `(.L_x_1) ;
        /*0030*/                   STG.E.128 desc[UR4][R2.64], R8 ;
        /*0040*/               @P3 BRA `(.L_x_0) ;
        /*0050*/                   EXIT ;
$k$outer:
        /*0060*/                   FFMA R8, R4, R5, R6 ;
        /*0070*/                   CALL.REL.NOINC `($k$inner) ;
        /*0080*/                   RET.REL.NODEC R20 `(k) ;
$k$inner:
        /*0090*/                   PRMT R9, R8, 0x40, R8 ;
        /*00a0*/                   FMUL R9, R9, R9 ;
        /*00b0*/                   RET.REL.NODEC R22 `(k) ;
)";

// A guarded call whose target reaches EXIT before any RET (ptxas's call into the kernel's exit
// path), here inside the heads loop so that taking it for a function would change the count.
constexpr const char* kSassCallIntoExit = R"(
.L_x_0:
        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
.L_x_1:
        /*0010*/               @P1 CALL.REL.NOINC `(.L_x_2) ;
        /*0020*/               @P0 BRA `(.L_x_1) ;
        /*0030*/               @P3 BRA `(.L_x_0) ;
.L_x_2:
        /*0040*/                   EXIT ;
        /*0050*/                   RET.REL.NODEC R20 `(k) ;
)";

}  // namespace ropejit::sample_listings
