"""The optional compiled token core (app/text/_core.pyx); everything else is in pyproject.toml.

Cython translates the .pyx at build time (it is in [build-system].requires, a pure-Python
wheel), so no generated C is kept in the repository. `optional`: without a C compiler the
build of the extension fails, setuptools says so and installs the rest, and spamsift runs its
pure-Python tokenizer, which gives the same tokens.
"""

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # built without build isolation and without Cython: Python tokenizer only
    extensions = []
else:
    extensions = cythonize(
        [Extension("app.text._core", ["app/text/_core.pyx"])],
        compiler_directives={"language_level": "3"},
    )
    for extension in extensions:
        extension.optional = True  # cythonize() drops the flag: set it on what it returns

setup(ext_modules=extensions)
