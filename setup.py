"""Build the Cython extension ``fastdeflate._fastdeflate`` against the system zlib."""

from Cython.Build import cythonize
from setuptools import Extension, setup

extension = Extension(
    "fastdeflate._fastdeflate",
    sources=["_fastdeflate.pyx"],
    libraries=["z"],
    define_macros=[("ZLIB_CONST", None)],
)

setup(
    ext_modules=cythonize([extension], compiler_directives={"language_level": "3"}),
)
