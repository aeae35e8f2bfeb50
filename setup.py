"""The optional compiled extensions: the token core (app/text/_core.pyx) and the token index's
lookup by hash (app/bayes/_index.pyx); everything else is in pyproject.toml.

Cython translates the .pyx at build time (it is in [build-system].requires, a pure-Python
wheel), so no generated C is kept in the repository. `optional`: without a C compiler the
build of an extension fails, setuptools says so and installs the rest, and spamsift runs its
pure-Python tokenizer and numpy's binary search, which give the same tokens and the same ids.
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildWithoutDebugInfo(build_ext):
    """Python's own CFLAGS ask for debug information (-g): for this extension's 1.9 MB of
    generated C, a third of the compiler's time (15.6 s -> 10.9 s on a 2-core machine) and
    most of the module's size, which nobody installing spamsift reads. The code compiled is
    the same."""

    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "unix":  # gcc and clang; -g0 comes after -g
            for extension in self.extensions:
                extension.extra_compile_args.append("-g0")
        super().build_extensions()


try:
    from Cython.Build import cythonize
except ImportError:  # built without build isolation and without Cython: Python tokenizer only
    extensions = []
else:
    extensions = cythonize(
        [
            Extension("app.text._core", ["app/text/_core.pyx"]),
            Extension("app.bayes._index", ["app/bayes/_index.pyx"]),
        ],
        compiler_directives={"language_level": "3"},
    )
    for extension in extensions:
        extension.optional = True  # cythonize() drops the flag: set it on what it returns

setup(ext_modules=extensions, cmdclass={"build_ext": BuildWithoutDebugInfo})
