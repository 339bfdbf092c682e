"""Finding the Java that Spark needs (17 or newer), before Spark fails with a Py4J trace."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from delayline.errors import JavaNotFoundError

_INSTALL_HINT = (
    "install a JRE (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
)


def java_major_version(version_output: str) -> int | None:
    """The major version in ``java -version`` output ("1.8.0_392" is 8), or None."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> None:
    """Raise JavaNotFoundError unless Java 17 or newer is available to Spark."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if java is None or not Path(java).exists():
        raise JavaNotFoundError(f"Java 17 or newer is needed to run the scheduler: {_INSTALL_HINT}")
    try:
        # In a session of its own: a SIGTERM to our process group (a stop during the
        # start) must not end the probe and read as a Java of unknown version.
        completed = subprocess.run(
            [java, "-version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            start_new_session=True,
        )
    except OSError as exc:
        raise JavaNotFoundError(f"cannot run {java} ({exc}): {_INSTALL_HINT}") from exc
    major = java_major_version(completed.stderr + completed.stdout)
    if major is None or major < 17:
        raise JavaNotFoundError(
            f"{java} is Java {major or 'of unknown version'}; Spark 4 needs 17 or newer: "
            f"{_INSTALL_HINT}"
        )
