//! Users' GPU code, with CuPy's names: `elementwise_kernel`,
//! `reduction_kernel` and `raw_kernel`. The first two return function
//! pointers (Rhai reserves `.call` for them, as `delayed` does) with the
//! kernel curried in; `k.call(x, y)` builds lazy layers. A `RawKernel` is
//! a value of its own: `x.map_blocks_gpu(k, ...)` on lazy arrays, and
//! `k.launch(...)` in a task, where a closure may capture it.

use std::sync::Arc;

use brisk_engine::array::gpu::raw::{HostArg, RawLaunch, launch_host};
use brisk_engine::array::gpu::user::{ElementwiseSpec, RawSpec, ReductionSpec};
use brisk_engine::array::{Chunk, Scalar};
use brisk_engine::collections::array::{self as arr, Operand};
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, FnPtr, Map};

use super::args::{ctx, wrong_type};
use super::array_args::{Opts, axes_arg, dtype_arg, err, int_of, lazy_operand, scalar_of};
use super::fndoc::{FnDoc, doc};
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::{LazyArray, RawKernel};

type Res<T> = Result<T, Box<EvalAltResult>>;

pub const DOCS: &[FnDoc] = &[
    doc(
        "elementwise_kernel",
        "elementwise_kernel(in_params, out_params, body, name) -> kernel; k.call(x, y, ...) -> Array",
        "A GPU kernel of your own, as CuPy's ElementwiseKernel: in_params and out_params are \"type name\" lists (types bool, int64, float32, float64, or a placeholder such as T bound by the arguments' types), body is C++ that sets the output from the inputs. k.call(...) takes GPU arrays and numbers with broadcasting and chunk alignment, and fuses with the elementwise work around it into one generated kernel. Compiled once by NVRTC and cached on disk (BRISK_KERNEL_CACHE); a compile error shows NVRTC's log with the line in your body. One output parameter.",
        "let k = elementwise_kernel(\"T x, T y\", \"T z\", \"z = x * y + 1.0\", \"mul_add\");\nlet x = random([1000, 1000], #{chunks: 500}).to_gpu();\nk.call(x, x.T).sum().compute()",
    ),
    doc(
        "reduction_kernel",
        "reduction_kernel(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name[, #{reduce_type}]) -> kernel; k.call(x, ..., #{axis, keepdims}) -> Array",
        "A reduction of your own, as CuPy's ReductionKernel: map_expr maps the inputs, reduce_expr folds two values a and b, post_map_expr sets the output from the folded a (_in_ind.size() is the number of elements folded into it), identity starts each fold. Folded per block with brisk's reduction kernels, then across blocks as a tree. reduce_type (default the output's type) is the type a and b have.",
        "let l2 = reduction_kernel(\"T x\", \"T y\", \"x * x\", \"a + b\", \"y = sqrt(a)\", \"0\", \"l2norm\");\nl2.call(random([1000, 300]).to_gpu(), #{axis: 0}).compute()",
    ),
    doc(
        "raw_kernel",
        "raw_kernel(cuda_source, name) -> RawKernel",
        "A CUDA source of your own with an extern \"C\" __global__ function called name, as CuPy's RawKernel. Launch it on every block of a GPU array with x.map_blocks_gpu(k, ...) or, in a task, with k.launch(...). Each launch is waited for, so a fault (an illegal address) fails that task with the CUDA error and the kernel's name; a CUDA worker then restarts with a new context.",
        "let k = raw_kernel(\"extern \\\"C\\\" __global__ void twice(const double* x, double* y, long long n) { long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0 * x[i]; }\", \"twice\");\nrandom([1000]).to_gpu().map_blocks_gpu(k).sum().compute()",
    ),
    doc(
        "map_blocks_gpu",
        "x.map_blocks_gpu(k, #{grid, block, shared_mem, args, dtype}) -> Array",
        "Launch a raw_kernel once per block of a GPU array as name(in, out, n, args...): in is the block (C order), out a new block of the same shape (of dtype, default the input's), n the number of elements (long long), then args (ints as long long, floats as double). block defaults to 256 threads and grid to enough blocks for one thread per element; both take a number or [x, y, z].",
        "let k = raw_kernel(\"extern \\\"C\\\" __global__ void scale(const double* x, double* y, long long n, double k) { long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] = k * x[i]; }\", \"scale\");\nrandom([1000], #{chunks: 300}).to_gpu().map_blocks_gpu(k, #{block: 128, args: [3.0]}).max().compute()",
    ),
    doc(
        "launch",
        "k.launch(#{grid, block, shared_mem, args}) -> array of ndarrays",
        "Launch a raw_kernel now on this process's GPU, as CuPy's k(grid, block, args): ndarrays in args go to the GPU (a pointer each), numbers are passed by value (ints as long long, floats as double), and the arrays come back after the kernel, in order, written as the kernel left them. For tasks: submit(|x| k.launch(...)[1], x).",
        "let k = raw_kernel(\"extern \\\"C\\\" __global__ void inc(double* y, long long n) { long long i = threadIdx.x; if (i < n) y[i] += 1.0; }\", \"inc\");\nlet x = random([8]).to_gpu().compute();\nk.launch(#{grid: 1, block: 32, args: [x, 8]})[0]",
    ),
];

/// The native functions behind `k.call(...)`: Rhai reserves `.call` for
/// function pointers, so a kernel is a pointer to one of these with the
/// kernel curried in (the leading `_` keeps them out of completion).
const EW_CALL: &str = "_elementwise_kernel_call";
const RED_CALL: &str = "_reduction_kernel_call";

#[derive(Clone)]
struct EwKernel(Arc<ElementwiseSpec>);

#[derive(Clone)]
struct RedKernel(Arc<ReductionSpec>);

fn pointer(name: &str, curried: Dynamic) -> Res<FnPtr> {
    let mut p = FnPtr::new(name)?;
    p.add_curry(curried);
    Ok(p)
}

fn operands(state: &SessionState, what: &str, args: &[Dynamic]) -> Res<Vec<Operand>> {
    args.iter().map(|a| lazy_operand(state, a, what)).collect()
}

fn ew_call(state: &SessionState, k: &EwKernel, args: &[Dynamic]) -> Res<LazyArray> {
    let ops = operands(state, &k.0.name, args)?;
    if !ops.iter().any(|o| matches!(o, Operand::Array(_))) {
        return Err(runtime(format!("{}: give at least one array", k.0.name)));
    }
    arr::user_elementwise(&ctx(state), &k.0, &ops).map(LazyArray::new).map_err(err)
}

fn red_call(state: &SessionState, k: &RedKernel, args: &[Dynamic]) -> Res<LazyArray> {
    let name = &k.0.name;
    let (args, opts) = match args.split_last() {
        Some((last, rest)) if last.is_map() => (rest, last.clone().try_cast::<Map>()),
        _ => (args, None),
    };
    let o = Opts::new(opts, name, &["axis", "keepdims"])?;
    let axes = match o.get("axis") {
        Some(a) => axes_arg(a)?,
        None => None,
    };
    let keepdims = match o.get("keepdims") {
        Some(d) => d.as_bool().map_err(|_| wrong_type(name, "keepdims: true or false", d))?,
        None => false,
    };
    let ops = operands(state, name, args)?;
    if !ops.iter().any(|o| matches!(o, Operand::Array(_))) {
        return Err(runtime(format!("{name}: give at least one array")));
    }
    arr::user_reduction(&ctx(state), &k.0, &ops, axes.as_deref(), keepdims).map(LazyArray::new).map_err(err)
}

macro_rules! register_calls {
    ($engine:ident, $state:ident; $($a:ident),+) => {{
        let st = $state.clone();
        $engine.register_fn(EW_CALL, move |k: EwKernel, $($a: Dynamic),+| ew_call(&st, &k, &[$($a),+]));
        let st = $state.clone();
        $engine.register_fn(RED_CALL, move |k: RedKernel, $($a: Dynamic),+| red_call(&st, &k, &[$($a),+]));
    }};
}

/// Three sizes from a number or `[x, y, z]` (missing ones are 1).
fn dims(d: &Dynamic, what: &str) -> Res<[u32; 3]> {
    let items: Vec<Dynamic> = match d.read_lock::<RArray>() {
        Some(a) => a.to_vec(),
        None => vec![d.clone()],
    };
    if items.is_empty() || items.len() > 3 {
        return Err(runtime(format!("{what} must be a number or [x, y, z]")));
    }
    let mut out = [1u32; 3];
    for (i, x) in items.iter().enumerate() {
        let n = int_of(x, what)?;
        out[i] =
            u32::try_from(n).map_err(|_| runtime(format!("{what} must be between 0 and 2^32, got {n}")))?;
    }
    Ok(out)
}

fn number(d: &Dynamic, what: &str) -> Res<Scalar> {
    scalar_of(d).ok_or_else(|| wrong_type(what, "a number or a bool", d))
}

/// Bytes of dynamic shared memory (default none).
fn shared_mem(o: &Opts) -> Res<u32> {
    let n = o.get("shared_mem").map(|d| int_of(d, "shared_mem")).transpose()?.unwrap_or(0);
    u32::try_from(n).map_err(|_| runtime(format!("shared_mem must be between 0 and 2^32 bytes, got {n}")))
}

fn map_blocks_gpu(state: &SessionState, x: &LazyArray, k: &RawKernel, m: Option<Map>) -> Res<LazyArray> {
    const F: &str = "map_blocks_gpu";
    let o = Opts::new(m, F, &["grid", "block", "shared_mem", "args", "dtype"])?;
    let launch = RawLaunch {
        grid: o.get("grid").map(|d| dims(d, "grid")).transpose()?,
        block: o.get("block").map(|d| dims(d, "block")).transpose()?.unwrap_or([256, 1, 1]),
        shared: shared_mem(&o)?,
        args: match o.get("args") {
            Some(d) => {
                let a =
                    d.read_lock::<RArray>().ok_or_else(|| wrong_type(F, "args: an array of numbers", d))?;
                a.iter().map(|v| number(v, "map_blocks_gpu args")).collect::<Res<Vec<_>>>()?
            }
            None => vec![],
        },
        dtype: o.get("dtype").map(dtype_arg).transpose()?.unwrap_or(x.a.dtype),
    };
    arr::map_blocks_gpu(&ctx(state), &x.a, &k.0, launch).map(LazyArray::new).map_err(err)
}

fn launch(k: &RawKernel, m: Map) -> Res<RArray> {
    const F: &str = "launch";
    let o = Opts::new(Some(m), F, &["grid", "block", "shared_mem", "args"])?;
    let grid = dims(o.get("grid").ok_or_else(|| runtime("launch needs grid"))?, "grid")?;
    let block = dims(o.get("block").ok_or_else(|| runtime("launch needs block"))?, "block")?;
    let shared = shared_mem(&o)?;
    let mut args = Vec::new();
    if let Some(d) = o.get("args") {
        let a = d.read_lock::<RArray>().ok_or_else(|| wrong_type(F, "args: an array", d))?;
        for v in a.iter() {
            if let Some(c) = v.read_lock::<Chunk>() {
                args.push(HostArg::Array(c.clone()));
            } else if v.is::<LazyArray>() {
                return Err(runtime("launch takes computed arrays (ndarrays): call .compute() first"));
            } else {
                args.push(HostArg::Scalar(number(v, "launch args")?));
            }
        }
    }
    let out = launch_host(&k.0, grid, block, shared, &args).map_err(err)?;
    Ok(out.into_iter().map(Dynamic::from).collect())
}

/// Kernels and `map_blocks_gpu`, on the session's engine.
pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    engine.register_type_with_name::<EwKernel>("ElementwiseKernel");
    engine.register_type_with_name::<RedKernel>("ReductionKernel");
    engine.register_fn(
        "elementwise_kernel",
        |in_params: &str, out_params: &str, body: &str, name: &str| -> Res<FnPtr> {
            let spec = ElementwiseSpec::new(in_params, out_params, body, name).map_err(err)?;
            pointer(EW_CALL, Dynamic::from(EwKernel(Arc::new(spec))))
        },
    );
    fn reduction(args: [&str; 7], m: Option<Map>) -> Res<FnPtr> {
        let o = Opts::new(m, "reduction_kernel", &["reduce_type"])?;
        let reduce_type = match o.get("reduce_type") {
            Some(d) => Some(
                d.clone()
                    .into_string()
                    .map_err(|_| runtime("reduce_type must be a type name such as \"float64\""))?,
            ),
            None => None,
        };
        let [i, o2, map, red, post, id, name] = args;
        let spec =
            ReductionSpec::new(i, o2, map, red, post, id, name, reduce_type.as_deref()).map_err(err)?;
        pointer(RED_CALL, Dynamic::from(RedKernel(Arc::new(spec))))
    }
    engine.register_fn(
        "reduction_kernel",
        |i: &str, o: &str, map: &str, red: &str, post: &str, id: &str, name: &str| -> Res<FnPtr> {
            reduction([i, o, map, red, post, id, name], None)
        },
    );
    engine.register_fn(
        "reduction_kernel",
        |i: &str, o: &str, map: &str, red: &str, post: &str, id: &str, name: &str, m: Map| -> Res<FnPtr> {
            reduction([i, o, map, red, post, id, name], Some(m))
        },
    );
    register_calls!(engine, state; a);
    register_calls!(engine, state; a, b);
    register_calls!(engine, state; a, b, c);
    register_calls!(engine, state; a, b, c, d);
    register_calls!(engine, state; a, b, c, d, e);
    register_calls!(engine, state; a, b, c, d, e, f);
    register_calls!(engine, state; a, b, c, d, e, f, g);
    register_calls!(engine, state; a, b, c, d, e, f, g, h);
    let st = state.clone();
    engine.register_fn("map_blocks_gpu", move |x: &mut LazyArray, k: RawKernel| {
        map_blocks_gpu(&st, x, &k, None)
    });
    let st = state.clone();
    engine.register_fn("map_blocks_gpu", move |x: &mut LazyArray, k: RawKernel, m: Map| {
        map_blocks_gpu(&st, x, &k, Some(m))
    });
}

/// `raw_kernel` and `k.launch`, on every engine (tasks launch kernels).
pub fn register_values(engine: &mut Engine) {
    engine.register_type_with_name::<RawKernel>("RawKernel");
    engine.register_fn("raw_kernel", |source: &str, name: &str| -> Res<RawKernel> {
        RawSpec::new(source, name).map(|s| RawKernel(Arc::new(s))).map_err(err)
    });
    engine.register_fn("launch", |k: &mut RawKernel, m: Map| launch(k, m));
    engine.register_get("name", |k: &mut RawKernel| k.0.name.clone());
    engine.register_fn("to_string", |k: &mut RawKernel| format!("RawKernel({})", k.0.name));
    engine.register_fn("to_debug", |k: &mut RawKernel| format!("RawKernel({})", k.0.name));
}
