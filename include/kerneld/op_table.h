/* kerneld's ops and wire enums, declared once.
 *
 * Every list here is an X-macro: it takes the macro to apply to each entry. What derives from
 * it, and how each copy that cannot derive is held to it:
 *   - the C ABI's enums, kd_op_kind and op structs (include/kerneld/c/kerneld.h) expand it;
 *     libkerneld_c.so exports it as data (kd_enum_value_at, kd_op_info_at), from which the
 *     Python package builds its enums, ctypes structs and op constructors at load time;
 *   - the kernels' enum classes, DTypeName/DTypeSize and the other enum labels, each op's name
 *     and tensor list (OpTraits: the metric labels and error prefixes) expand it
 *     (include/kerneld/kernels/dtype.h, ops.h), and ops.h static_asserts that kd::Op lists the
 *     ops in this order;
 *   - kerneld.proto cannot include it: server/proto_convert.cc static_asserts each proto enum
 *     value against it and binds every op message field by field from it (a proto field missing
 *     from the message does not compile), and tests/server/proto_convert_test checks that the
 *     proto has no enum value, op or op field the table lacks.
 * docs/decisions/0017-one-op-table.md says why, and docs/ARCHITECTURE.md how an op is added.
 *
 * Enums. KD_ENUMS(X) lists them as X(Name, "c_prefix", "proto_enum", "proto_prefix"), and
 * KD_ENUM_VALUES_<Name>(X) lists enum Name's values as X(SUFFIX, kCppName, number, "label"):
 *   SUFFIX    the value's name in the C ABI (c_prefix SUFFIX: KD_QUANT_1X128), in kerneld.proto
 *             (proto_prefix SUFFIX: QUANT_1X128) and in Python (Granularity.G1X128: a name that
 *             starts with a digit gets a G);
 *   kCppName  its enumerator in the kernels' enum class (QuantGranularity::k1x128);
 *   number    its value everywhere; 0 is "unspecified" in every enum and is not listed;
 *   "label"   its name in metric labels, messages, kctl and Python strings ("1x128").
 * KD_ENUM_VALUES_DType has a fifth column, the element size in bytes.
 *
 * Ops. KD_OPS(X) lists them as X(name, Name, UPPER, number), numbered 1, 2, ... in order:
 *   name      the op's name: its metric label, error prefix, field in kerneld.proto's Op.kind
 *             and member of the C ABI's kd_op.u;
 *   Name      its types: kerneld.v1.NameOp, kd::NameArgs, kd_name_op (C), kerneld.Name (Python);
 *   UPPER     its kd_op_kind, KD_OP_UPPER;
 *   number    its kd_op_kind value and its field number in Op.kind.
 * KD_OP_FIELDS_<name>(T, E, B, I, F) lists the op's fields in kerneld.proto's field order (which
 * is also the C struct's):
 *   T(field, IN or OUT, REQUIRED or OPTIONAL)  a tensor the op reads (IN) or writes (OUT)
 *   E(field, Enum)                             a value of enum Enum (0: the op's default)
 *   B(field)  a flag      I(field)  an int32      F(field)  a float (0: the op's default)
 */
#ifndef KERNELD_OP_TABLE_H_
#define KERNELD_OP_TABLE_H_

#define KD_ENUMS(X)                                                             \
  X(DType, "KD_DTYPE_", "kerneld.v1.DType", "DTYPE_")                           \
  X(QuantGranularity, "KD_QUANT_", "kerneld.v1.QuantGranularity", "QUANT_")     \
  X(ScaleFormat, "KD_SCALE_", "kerneld.v1.ScaleFormat", "SCALE_")               \
  X(ScaleLayout, "KD_SCALE_LAYOUT_", "kerneld.v1.ScaleLayout", "SCALE_LAYOUT_") \
  X(MxRounding, "KD_MX_ROUNDING_", "kerneld.v1.MxRounding", "MX_ROUNDING_")     \
  X(GemmVariant, "KD_GEMM_", "kerneld.v1.GemmVariant", "GEMM_")                 \
  X(CompletionMode, "KD_COMPLETION_", "kerneld.v1.Completion.Mode", "")         \
  X(IpcKind, "KD_IPC_", "kerneld.v1.IpcMemHandle.Kind", "")

/* Element types. */
#define KD_ENUM_VALUES_DType(X)            \
  X(F32, kF32, 1, "f32", 4)                \
  X(BF16, kBF16, 2, "bf16", 2)             \
  X(F16, kF16, 3, "f16", 2)                \
  X(E4M3FN, kE4M3FN, 4, "e4m3fn", 1)       \
  X(E4M3FNUZ, kE4M3FNUZ, 5, "e4m3fnuz", 1) \
  X(E5M2, kE5M2, 6, "e5m2", 1)             \
  X(E8M0, kE8M0, 7, "e8m0", 1)             \
  X(I32, kI32, 8, "i32", 4)                \
  X(I64, kI64, 9, "i64", 8)                \
  X(U8, kU8, 10, "u8", 1)

/* How a quantize op blocks its input (kerneld.proto's QuantGranularity). */
#define KD_ENUM_VALUES_QuantGranularity(X)               \
  X(1X128, k1x128, 1, "1x128")                           \
  X(128X1, k128x1, 2, "128x1")                           \
  X(128X128, k128x128, 3, "128x128")                     \
  X(PER_ROW, kPerRow, 4, "per_row")                      \
  X(PER_TENSOR, kPerTensor, 5, "per_tensor")             \
  X(MX_1X32, kMx1x32, 6, "mx1x32")                       \
  X(JAGGED_ROWWISE, kJaggedRowwise, 7, "jagged_rowwise") \
  X(JAGGED_COLWISE, kJaggedColwise, 8, "jagged_colwise")

/* How a scale is stored: its fp32 value, or the nearest power of two at or below. */
#define KD_ENUM_VALUES_ScaleFormat(X) \
  X(FP32, kFp32, 1, "fp32")           \
  X(POW2, kPow2, 2, "pow2")

/* The layout of 1x128 scales: (rows, K/128) row-major, or (K/128, rows). */
#define KD_ENUM_VALUES_ScaleLayout(X)     \
  X(ROW_MAJOR, kRowMajor, 1, "row_major") \
  X(K_BLOCK_MAJOR, kKBlockMajor, 2, "k_block_major")

/* How an MX (e8m0) scale is rounded. */
#define KD_ENUM_VALUES_MxRounding(X) \
  X(FLOOR, kFloor, 1, "floor")       \
  X(RCEIL, kRceil, 2, "rceil")

/* The GEMM's operand forms (kerneld.proto's GemmVariant). */
#define KD_ENUM_VALUES_GemmVariant(X)             \
  X(NT, kNT, 1, "nt")                             \
  X(NN, kNN, 2, "nn")                             \
  X(TN, kTN, 3, "tn")                             \
  X(M_GROUPED_NT, kMGroupedNT, 4, "m_grouped_nt") \
  X(K_GROUPED_TN, kKGroupedTN, 5, "k_grouped_tn")

/* When an op call returns: after the device finished (SYNC) or after enqueue (ASYNC). */
#define KD_ENUM_VALUES_CompletionMode(X) \
  X(SYNC, kSync, 1, "sync")              \
  X(ASYNC, kAsync, 2, "async")

/* Whose IPC handle names a device buffer. */
#define KD_ENUM_VALUES_IpcKind(X) \
  X(CUDA, kCuda, 1, "cuda")       \
  X(HIP, kHip, 2, "hip")

/* ------------------------------------------------------------------------------------------ */

#define KD_OPS(X)                    \
  X(quantize, Quantize, QUANTIZE, 1) \
  X(gemm, Gemm, GEMM, 2)             \
  X(pad, Pad, PAD, 3)                \
  X(unpad, Unpad, UNPAD, 4)          \
  X(row_amax, RowAmax, ROW_AMAX, 5)

#define KD_OP_FIELDS_quantize(T, E, B, I, F) \
  T(input, IN, REQUIRED)                     \
  T(output, OUT, REQUIRED)                   \
  T(scales, OUT, REQUIRED)                   \
  E(granularity, QuantGranularity)           \
  B(transpose_output)                        \
  E(scale_format, ScaleFormat)               \
  E(scale_layout, ScaleLayout)               \
  F(eps)                                     \
  E(mx_rounding, MxRounding)                 \
  T(output_t, OUT, OPTIONAL)                 \
  T(scales_t, OUT, OPTIONAL)                 \
  T(group_ends, IN, OPTIONAL)

#define KD_OP_FIELDS_gemm(T, E, B, I, F) \
  E(variant, GemmVariant)                \
  T(a, IN, REQUIRED)                     \
  T(a_scales, IN, REQUIRED)              \
  T(b, IN, REQUIRED)                     \
  T(b_scales, IN, REQUIRED)              \
  T(d, OUT, REQUIRED)                    \
  B(accumulate)                          \
  T(group_ends, IN, OPTIONAL)

#define KD_OP_FIELDS_pad(T, E, B, I, F) \
  T(input, IN, REQUIRED)                \
  T(group_ends, IN, REQUIRED)           \
  T(output, OUT, REQUIRED)              \
  T(padded_group_ends, OUT, REQUIRED)   \
  I(alignment)

#define KD_OP_FIELDS_unpad(T, E, B, I, F) \
  T(input, IN, REQUIRED)                  \
  T(group_ends, IN, REQUIRED)             \
  T(output, OUT, REQUIRED)                \
  I(alignment)

#define KD_OP_FIELDS_row_amax(T, E, B, I, F) \
  T(input, IN, REQUIRED)                     \
  T(output, OUT, REQUIRED)

#endif /* KERNELD_OP_TABLE_H_ */
