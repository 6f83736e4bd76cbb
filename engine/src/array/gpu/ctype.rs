//! The C types of element types in generated CUDA source: a leaf that
//! the kernel generators (`expr.rs`) and users' snippets (`user.rs`) share.

use crate::array::dtype::DType;

/// The C type of a value of `t` in registers, and in memory.
pub fn ctype(t: DType) -> &'static str {
    match t {
        DType::Bool => "bool",
        DType::I64 => "long long",
        DType::F32 => "float",
        DType::F64 => "double",
    }
}

pub fn store_type(t: DType) -> &'static str {
    match t {
        DType::Bool => "unsigned char",
        t => ctype(t),
    }
}
