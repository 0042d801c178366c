"""Reading a file someone else may have put there: only a regular file, of bounded size, with
the file named in every error (a FIFO named like an input would block `open()` forever; a folder
or an unreadable file would raise an OSError naming nothing)."""

from __future__ import annotations

import os
import stat

from .errors import InputError


def read_regular(path, what: str, limit: int, error: type[InputError] = InputError) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. A FIFO or device (open() would
    block or never end), a folder, a missing or unreadable file: `error` naming the file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise error(f"{what} not found", path=str(path)) from None
    except OSError as exc:
        raise error(f"{what} cannot be read ({exc.strerror})", path=str(path)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what} is not a regular file", path=str(path))
        if st.st_size > limit:
            raise error(f"{what} is {st.st_size} bytes, more than it can be ({limit} bytes)",
                        path=str(path))
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise error(f"{what} cannot be read ({exc.strerror})", path=str(path)) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise error(f"{what} grew past {limit} bytes while read", path=str(path))
    return data
