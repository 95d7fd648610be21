"""Pure NumPy numerics: sampling, moments, theory, softmax. No files, terminals or plots."""
