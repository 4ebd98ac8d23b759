"""Tests of the empirical kernel map (paper 001, section 4)."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist, pdist

from omicsbayes.preprocess.kernels import EmpiricalKernelMap


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(loc=3.0, scale=[1.0, 5.0, 0.1, 2.0, 1.0], size=(30, 5))
    return X[:20], X[20:]


def zscore_train(train):
    return (train - train.mean(0)) / train.std(0)


def test_linear_kernel_has_unit_diagonal_and_is_cosine(data):
    train, test = data
    km = EmpiricalKernelMap("linear").fit(train)
    K = km.transform(train)
    assert K.shape == (20, 20)
    assert np.allclose(np.diag(K), 1.0)
    assert np.allclose(K, K.T)
    z = zscore_train(train)
    zt = (test - train.mean(0)) / train.std(0)
    expected = 1 - cdist(zt, z, "cosine")
    assert np.allclose(km.transform(test), expected)


def test_gaussian_width_is_mean_pairwise_training_distance(data):
    train, test = data
    km = EmpiricalKernelMap("gaussian").fit(train)
    z = zscore_train(train)
    assert km.width_ == pytest.approx(pdist(z).mean(), rel=1e-10)
    K = km.transform(train)
    assert np.allclose(np.diag(K), 1.0)
    zt = (test - train.mean(0)) / train.std(0)
    expected = np.exp(-cdist(zt, z, "sqeuclidean") / (2 * km.width_**2))
    assert np.allclose(km.transform(test), expected)


@pytest.mark.parametrize("kernel", ["linear", "gaussian"])
def test_statistics_come_from_training_samples_only(data, kernel):
    train, test = data
    km = EmpiricalKernelMap(kernel).fit(train)
    assert np.allclose(km.mean_, train.mean(0)) and np.allclose(km.scale_, train.std(0))
    # each test row depends on that row and the training set alone
    full = km.transform(test)
    assert np.allclose(km.transform(test[3:4]), full[3:4])
    shifted = test.copy()
    shifted[0] += 100.0
    assert np.allclose(km.transform(shifted)[1:], full[1:])
    # refitting on train plus test would change the map: the test rows are not used by fit
    joint = EmpiricalKernelMap(kernel).fit(np.vstack([train, test]))
    assert not np.allclose(joint.mean_, km.mean_)
    assert EmpiricalKernelMap.learns_from_samples is True


def test_constant_feature_zero_sample_and_errors():
    X = np.ones((4, 3))
    X[:, 0] = [1.0, 2.0, 3.0, 4.0]
    km = EmpiricalKernelMap("linear").fit(X)
    K = km.transform(np.array([[2.5, 7.0, -1.0]]))  # z-scores to the zero vector
    assert np.all(np.isfinite(K)) and np.allclose(K, 0.0)
    with pytest.raises(ValueError, match="kernel"):
        EmpiricalKernelMap("poly").fit(X)
    with pytest.raises(ValueError, match="features"):
        km.transform(np.ones((2, 2)))
    with pytest.raises(ValueError, match="NaN"):
        EmpiricalKernelMap().fit(np.array([[1.0, np.nan], [2.0, 3.0]]))
    with pytest.raises(ValueError, match="identical"):
        EmpiricalKernelMap("gaussian").fit(np.ones((3, 2)))
    assert list(km.get_feature_names_out()) == ["k0", "k1", "k2", "k3"]
    # a sparse matrix is expanded, as by every preprocessing step
    from scipy import sparse

    np.testing.assert_array_equal(
        EmpiricalKernelMap("gaussian").fit(sparse.csr_matrix(X)).transform(sparse.csr_matrix(X)),
        EmpiricalKernelMap("gaussian").fit(X).transform(X),
    )
