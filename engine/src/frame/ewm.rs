//! `ewm(...).mean()`, `.var()` and `.std()`: pandas' exponentially
//! weighted mean and variance (its `ewma` and `ewmcov` loops, with
//! `adjust`, `ignore_na`, `min_periods` and `bias`), across partitions:
//! the loop's state at the end of each partition (for the mean the
//! weighted value, the old weight and the count of observations; for the
//! variance also the weights' sums and the covariance so far) is carried
//! to the next, so each partition runs the loop from where the one before
//! stopped.

use polars::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ewm {
    /// The smoothing factor, in (0, 1].
    pub alpha: f64,
    pub adjust: bool,
    pub ignore_na: bool,
    pub min_periods: usize,
    /// Which statistic (the mean unless told).
    #[serde(default)]
    pub stat: EwmStat,
}

/// What an exponentially weighted window gives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum EwmStat {
    #[default]
    Mean,
    /// The variance; `bias`: without the unbiasing factor.
    Var {
        bias: bool,
    },
    Std {
        bias: bool,
    },
}

/// pandas' `ewmcov` state of one column (x and y the same column): the
/// mean, the covariance, the sums of weights and of their squares, the old
/// weight, the observations, and whether the first value was seen.
#[derive(Clone, Copy, Debug, PartialEq)]
struct VarState {
    mean: f64,
    cov: f64,
    sum_wt: f64,
    sum_wt2: f64,
    old_wt: f64,
    nobs: f64,
    started: bool,
}

const VAR_START: VarState =
    VarState { mean: f64::NAN, cov: 0.0, sum_wt: 1.0, sum_wt2: 1.0, old_wt: 1.0, nobs: 0.0, started: false };

impl VarState {
    fn to_row(self) -> [Option<f64>; 7] {
        let f = |x: f64| (!x.is_nan()).then_some(x);
        [
            f(self.mean),
            Some(self.cov),
            Some(self.sum_wt),
            Some(self.sum_wt2),
            Some(self.old_wt),
            Some(self.nobs),
            Some(f64::from(u8::from(self.started))),
        ]
    }

    fn from_row(r: &[Option<f64>]) -> Option<VarState> {
        Some(VarState {
            mean: (*r.first()?).unwrap_or(f64::NAN),
            cov: (*r.get(1)?)?,
            sum_wt: (*r.get(2)?)?,
            sum_wt2: (*r.get(3)?)?,
            old_wt: (*r.get(4)?)?,
            nobs: (*r.get(5)?)?,
            started: (*r.get(6)?)? != 0.0,
        })
    }
}
/// The loop's state for one column.
#[derive(Clone, Copy, Debug, PartialEq)]
struct State {
    weighted: f64,
    old_wt: f64,
    nobs: f64,
}

const START: State = State { weighted: f64::NAN, old_wt: 1.0, nobs: 0.0 };

impl Ewm {
    /// The weighted variances (or deviations) of `v` from `st`, and the
    /// state after them: pandas' `ewmcov` with both inputs the same.
    fn run_var(
        &self,
        v: &[Option<f64>],
        mut st: VarState,
        bias: bool,
        sqrt: bool,
    ) -> (Vec<Option<f64>>, VarState) {
        let (decay, new_wt) = (1.0 - self.alpha, if self.adjust { 1.0 } else { self.alpha });
        let minp = self.min_periods.max(1) as f64;
        let out = v
            .iter()
            .map(|x| {
                let cur = x.unwrap_or(f64::NAN);
                let obs = !cur.is_nan();
                let value = if !st.started {
                    st.started = true;
                    st.mean = if obs { cur } else { f64::NAN };
                    st.nobs = f64::from(u8::from(obs));
                    if bias { 0.0 } else { f64::NAN }
                } else {
                    st.nobs += f64::from(u8::from(obs));
                    if !st.mean.is_nan() {
                        if obs || !self.ignore_na {
                            st.sum_wt *= decay;
                            st.sum_wt2 *= decay * decay;
                            st.old_wt *= decay;
                            if obs {
                                let old_mean = st.mean;
                                if st.mean != cur {
                                    st.mean = (st.old_wt * old_mean + new_wt * cur) / (st.old_wt + new_wt);
                                }
                                let d_old = old_mean - st.mean;
                                let d_cur = cur - st.mean;
                                st.cov = (st.old_wt * (st.cov + d_old * d_old) + new_wt * d_cur * d_cur)
                                    / (st.old_wt + new_wt);
                                st.sum_wt += new_wt;
                                st.sum_wt2 += new_wt * new_wt;
                                st.old_wt += new_wt;
                                if !self.adjust {
                                    st.sum_wt /= st.old_wt;
                                    st.sum_wt2 /= st.old_wt * st.old_wt;
                                    st.old_wt = 1.0;
                                }
                            }
                        }
                    } else if obs {
                        st.mean = cur;
                    }
                    if bias {
                        st.cov
                    } else {
                        let numerator = st.sum_wt * st.sum_wt;
                        let denominator = numerator - st.sum_wt2;
                        if denominator > 0.0 { numerator / denominator * st.cov } else { f64::NAN }
                    }
                };
                let value = if sqrt { value.sqrt() } else { value };
                (st.nobs >= minp && !value.is_nan()).then_some(value)
            })
            .collect();
        (out, st)
    }

    /// The weighted means of `v` from `st`, and the state after them.
    fn run(&self, v: &[Option<f64>], mut st: State) -> (Vec<Option<f64>>, State) {
        let (decay, new_wt) = (1.0 - self.alpha, if self.adjust { 1.0 } else { self.alpha });
        let minp = self.min_periods.max(1) as f64;
        let out = v
            .iter()
            .map(|x| {
                let cur = x.unwrap_or(f64::NAN);
                let obs = !cur.is_nan();
                st.nobs += f64::from(u8::from(obs));
                if !st.weighted.is_nan() {
                    if obs || !self.ignore_na {
                        st.old_wt *= decay;
                        if obs {
                            if st.weighted != cur {
                                st.weighted = (st.old_wt * st.weighted + new_wt * cur) / (st.old_wt + new_wt);
                            }
                            st.old_wt = if self.adjust { st.old_wt + new_wt } else { 1.0 };
                        }
                    }
                } else if obs {
                    st.weighted = cur;
                }
                (st.nobs >= minp && !st.weighted.is_nan()).then_some(st.weighted)
            })
            .collect();
        (out, st)
    }

    /// The partition with the statistic of `columns` (as floats), or with
    /// `state_only` the loop's state after it, one row per number of the
    /// state. `before` is the state the partition before left.
    pub fn step(
        &self,
        columns: &[String],
        part: &DataFrame,
        before: Option<&DataFrame>,
        state_only: bool,
    ) -> PolarsResult<DataFrame> {
        if let EwmStat::Var { bias } | EwmStat::Std { bias } = self.stat {
            let sqrt = matches!(self.stat, EwmStat::Std { .. });
            return self.step_var(columns, part, before, state_only, bias, sqrt);
        }
        let mut cols = Vec::with_capacity(columns.len());
        for c in columns {
            let st = match before {
                Some(b) => {
                    let s = b.column(c)?.cast(&DataType::Float64)?;
                    let s = s.f64()?;
                    match (s.get(0), s.get(1), s.get(2)) {
                        (w, Some(old_wt), Some(nobs)) => {
                            State { weighted: w.unwrap_or(f64::NAN), old_wt, nobs }
                        }
                        _ => return Err(PolarsError::ComputeError("ewm: a bad carried state".into())),
                    }
                }
                None => START,
            };
            let v: Vec<Option<f64>> = part.column(c)?.cast(&DataType::Float64)?.f64()?.iter().collect();
            let (out, st) = self.run(&v, st);
            let name: PlSmallStr = c.as_str().into();
            cols.push(if state_only {
                let w = (!st.weighted.is_nan()).then_some(st.weighted);
                Series::new(name, [w, Some(st.old_wt), Some(st.nobs)]).into_column()
            } else {
                Series::new(name, out).into_column()
            });
        }
        if state_only {
            return DataFrame::new(3, cols);
        }
        with_columns(part, cols)
    }

    fn step_var(
        &self,
        columns: &[String],
        part: &DataFrame,
        before: Option<&DataFrame>,
        state_only: bool,
        bias: bool,
        sqrt: bool,
    ) -> PolarsResult<DataFrame> {
        let mut cols = Vec::with_capacity(columns.len());
        for c in columns {
            let st = match before {
                Some(b) => {
                    let row: Vec<Option<f64>> =
                        b.column(c)?.cast(&DataType::Float64)?.f64()?.iter().collect();
                    VarState::from_row(&row)
                        .ok_or_else(|| PolarsError::ComputeError("ewm: a bad carried state".into()))?
                }
                None => VAR_START,
            };
            let v: Vec<Option<f64>> = part.column(c)?.cast(&DataType::Float64)?.f64()?.iter().collect();
            let (out, st) = self.run_var(&v, st, bias, sqrt);
            let name: PlSmallStr = c.as_str().into();
            cols.push(if state_only {
                Series::new(name, st.to_row()).into_column()
            } else {
                Series::new(name, out).into_column()
            });
        }
        if state_only {
            return DataFrame::new(7, cols);
        }
        with_columns(part, cols)
    }
}

fn with_columns(part: &DataFrame, cols: Vec<Column>) -> PolarsResult<DataFrame> {
    let mut out = part.clone();
    for c in cols {
        out.with_column(c)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WANT_PLAIN: [f64; 6] =
        [1.0, 1.0, 2.0526315789473686, 2.8315789473684214, 3.6989473684210528, 3.019368421052632];

    /// pandas 3.1: `Series([1, nan, 3, 4, 5, 2]).ewm(...).mean()`.
    #[test]
    fn matches_pandas_across_a_cut() {
        let v = [Some(1.0), None, Some(3.0), Some(4.0), Some(5.0), Some(2.0)];
        let span3 = Ewm { alpha: 0.5, adjust: true, ignore_na: false, min_periods: 0, stat: EwmStat::Mean };
        let want = [1.0, 1.0, 2.6, 3.4615384615384617, 4.310344827586207, 3.098360655737705];
        // (pandas 3.1 gives other numbers for alpha = 0.5 exactly without
        // `adjust`; every other alpha follows its loop, as here.)
        let plain = Ewm { adjust: false, alpha: 0.4, ..span3 };
        let want_plain = WANT_PLAIN;
        for (e, want) in [(span3, want), (plain, want_plain)] {
            for cut in 0..=v.len() {
                let (a, st) = e.run(&v[..cut], START);
                let (b, _) = e.run(&v[cut..], st);
                let got: Vec<f64> = a.into_iter().chain(b).map(|x| x.unwrap_or(f64::NAN)).collect();
                for (g, w) in got.iter().zip(want) {
                    assert!((g - w).abs() < 1e-12, "cut {cut}: {got:?}");
                }
            }
        }
        let part = df!("x" => v.to_vec()).expect("df");
        let st = span3.step(&["x".into()], &part.slice(0, 3), None, true).expect("state");
        let rest = span3.step(&["x".into()], &part.slice(3, 3), Some(&st), false).expect("rest");
        let got = rest.column("x").expect("x").f64().expect("f").get(0).expect("value");
        assert!((got - want[3]).abs() < 1e-12);
    }

    /// pandas 3.1: `Series([1, nan, 3, 4, 5, 2, 2, 7.5]).ewm(alpha=0.5).var()`,
    /// `var(bias=True)`, and `ewm(alpha=0.4, adjust=False).std()`.
    #[test]
    fn variance_matches_pandas_across_every_cut() {
        let nan = f64::NAN;
        let v = [Some(1.0), None, Some(3.0), Some(4.0), Some(5.0), Some(2.0), Some(2.0), Some(7.5)];
        let base = Ewm { alpha: 0.5, adjust: true, ignore_na: false, min_periods: 0, stat: EwmStat::Mean };
        let cases = [
            (
                base,
                false,
                false,
                [
                    nan,
                    nan,
                    2.0,
                    1.3636363636363635,
                    1.507936507936508,
                    2.776271186440679,
                    1.7836349331235253,
                    10.220261809903246,
                ],
            ),
            (
                base,
                true,
                false,
                [
                    0.0,
                    0.0,
                    0.64,
                    0.7100591715976331,
                    0.9036860879904874,
                    1.7608169846815378,
                    1.1607040000000004,
                    6.732928181974411,
                ],
            ),
            (
                Ewm { alpha: 0.4, adjust: false, ..base },
                false,
                true,
                [
                    nan,
                    nan,
                    std::f64::consts::SQRT_2,
                    1.512381693586898,
                    1.6836178034218783,
                    1.6096696575676754,
                    1.3687121131378757,
                    2.9634936258654463,
                ],
            ),
            (
                Ewm { alpha: 0.5, ignore_na: true, ..base },
                false,
                false,
                [
                    nan,
                    nan,
                    2.0,
                    1.8571428571428568,
                    1.9714285714285718,
                    2.7935483870967746,
                    1.783410138248848,
                    10.236595425571803,
                ],
            ),
        ];
        for (e, bias, sqrt, want) in cases {
            for cut in 0..=v.len() {
                let (a, st) = e.run_var(&v[..cut], VAR_START, bias, sqrt);
                let st = VarState::from_row(&st.to_row()).expect("round trip");
                let (b, _) = e.run_var(&v[cut..], st, bias, sqrt);
                let got: Vec<f64> = a.into_iter().chain(b).map(|x| x.unwrap_or(nan)).collect();
                for (g, w) in got.iter().zip(want) {
                    assert!(
                        (g.is_nan() && w.is_nan()) || (g - w).abs() < 1e-9,
                        "{e:?} bias {bias} cut {cut}: {got:?}"
                    );
                }
            }
        }
    }
}
