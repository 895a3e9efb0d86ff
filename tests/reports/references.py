"""Independent references the report tests check the statistics against: the sign-flip test by
enumerating every sign pattern, its interval by trying every subset mean as a shift, scipy's
exact binomial interval and a naive Holm."""
import itertools
import math

import numpy as np
from scipy import stats as sps


def sign_ps(diffs, shifts):
    """Two-sided sign-flip p at each of `shifts`, over every sign pattern: twice the smaller
    tail, at most 1."""
    x = np.asarray(diffs, np.float64)
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=x.size)))
    centred = x[None, :] - np.asarray(shifts, np.float64)[:, None]   # (shifts, n)
    sums, observed = centred @ signs.T, centred.sum(1, keepdims=True)  # (shifts, patterns)
    greater = np.mean(sums >= observed - 1e-9, axis=1)
    less = np.mean(sums <= observed + 1e-9, axis=1)
    return np.minimum(1.0, 2 * np.minimum(greater, less))


def sign_p(diffs, shift=0.0):
    return float(sign_ps(diffs, [shift])[0])


def achieved_alpha(n, alpha):
    """The largest alpha' <= alpha the test can hold exactly (a multiple of 2/2^n), or 2/2^n
    (the range of the values) where none is."""
    step = 2 / 2 ** n
    return max(step, math.floor(alpha / step + 1e-9) * step)


def inverted(values, alpha=0.05):
    """(low, high, level): the shifts the two-sided sign-flip test at the achieved level does
    not reject, found by trying every subset mean (where p changes) as a shift."""
    x = np.asarray(values, np.float64)
    level = achieved_alpha(x.size, alpha)
    shifts = sorted({float(np.mean(c)) for k in range(1, x.size + 1)
                     for c in itertools.combinations(x, k)})
    kept = [m for m, p in zip(shifts, sign_ps(x, shifts)) if p > level + 1e-12]
    return kept[0], kept[-1], 1 - level


def clopper_pearson(k, n):
    ci = sps.binomtest(k, n).proportion_ci(0.95, method='exact')
    return ci.low, ci.high


def naive_holm(pvalues):
    """Holm's adjusted p: for the k-th smallest, the largest min(1, (m - j) p_(j)), j <= k."""
    m, ranked = len(pvalues), sorted(pvalues)
    return [max(min(1.0, (m - j) * ranked[j]) for j in range(ranked.index(p) + 1))
            for p in pvalues]
