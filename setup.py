"""The optional compiled token core (app/text/_core.pyx); everything else is in pyproject.toml.

Cython translates the .pyx at build time (it is in [build-system].requires, a pure-Python
wheel), so no generated C is kept in the repository. `optional=True`: without a C compiler
the build of the extension fails, setuptools says so and installs the rest, and spamsift runs
its pure-Python tokenizer, which gives the same tokens.
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("app.text._core", ["app/text/_core.pyx"], optional=True)],
        compiler_directives={"language_level": "3"},
    )
)
