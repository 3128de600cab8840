"""setup.py: `pip install ./python` copies the built libprimc.so and libprimc_rt.a (which it links models with)
into the package, so the installed package works from anywhere and after the build dir is gone. The build dir
is ../build, or $PRIMC_BUILD_DIR; run `make` first. Installing again after a rebuild picks the new library up."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
LIBS = ["libprimc.so", "libprimc_rt.a"]


class BuildPyWithLib(build_py):
    def run(self):
        super().run()
        build = os.environ.get("PRIMC_BUILD_DIR") or os.path.join(os.path.dirname(HERE), "build")
        missing = [f for f in LIBS if not os.path.isfile(os.path.join(build, f))]
        if missing:
            raise SystemExit(f"primc: {', '.join(missing)} not in {build}: run `make` in the repository first "
                             "(or set PRIMC_BUILD_DIR to the build dir)")
        dest = os.path.join(self.build_lib, "primc", "_lib")
        os.makedirs(dest, exist_ok=True)
        for f in LIBS:
            shutil.copy2(os.path.join(build, f), os.path.join(dest, f))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):  # the wheel holds a native library: tag it for this platform
        return True


setup(cmdclass={"build_py": BuildPyWithLib}, distclass=BinaryDistribution)
