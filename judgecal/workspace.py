"""One study's artefacts on any filesystem: a local folder or ``s3://bucket/prefix``.

Every stage reads and writes through a :class:`Workspace`; nothing else builds paths.
Reads and listings go through ``pyarrow.fs``; writes are whole-or-nothing:

* local: a temporary file in the same folder, then ``os.replace`` (or ``os.link`` for an
  exclusive create, which fails if the name exists);
* S3: one ``PutObject`` through boto3 (an object appears whole or not at all), with
  ``If-None-Match: *`` for an exclusive create (pyarrow cannot send that header).

Endpoint, region and credentials come from the standard AWS chain (``AWS_ENDPOINT_URL``,
``AWS_PROFILE``, instance roles, ...). The workspace keeps only its URI, so no secret can
reach an artefact or a log line, and it pickles into Ray workers as that URI.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from judgecal.errors import InputError


class Workspace:
    def __init__(self, uri: str):
        given = str(uri)  # as typed, for the refusals ('s3://' read back as 's3:' was no help)
        uri = given.rstrip("/")
        if not uri:
            raise InputError("[study].output", "empty output location")
        scheme = urlparse(uri).scheme  # lower-cased by urlparse
        if scheme:
            uri = scheme + uri[len(scheme):]
        if scheme not in ("", "file", "s3") or (scheme == "" and "://" in uri):
            raise InputError("[study].output", f"{uri!r}: unsupported scheme (use a local path or s3://bucket/prefix)")
        if scheme == "s3" and not urlparse(uri).netloc:
            raise InputError("[study].output", f"{given!r}: no bucket")
        # ~ as the config checks read it (check_output): the checks and the writes saw two folders
        self.uri = uri if scheme == "s3" else os.path.abspath(os.path.expanduser(uri.removeprefix("file://")))
        self.is_s3 = scheme == "s3"
        self._fs = self._s3 = None

    def __reduce__(self):  # workers rebuild their own clients from the URI
        return (Workspace, (self.uri,))

    def __repr__(self) -> str:
        return f"Workspace({self.uri!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Workspace) and other.uri == self.uri

    def __hash__(self) -> int:
        return hash(self.uri)

    def child(self, name: str) -> "Workspace":
        return Workspace(self.join(name))

    def join(self, name: str) -> str:
        """The full URI (or local path) of ``name`` inside this workspace; a name that would
        climb out of it (a ``..`` part) is refused."""
        if ".." in name.replace("\\", "/").split("/"):
            raise InputError(self.uri, f"{name!r} would lie outside this folder; names inside a study never hold '..'")
        return f"{self.uri}/{name.strip('/')}" if name else self.uri

    # -- the two clients ------------------------------------------------------------
    @property
    def fs(self) -> pafs.FileSystem:
        if self._fs is None:
            if self.is_s3:
                _check_endpoint_answers()
                self._fs = pafs.S3FileSystem(**_s3_options())
            else:
                self._fs = pafs.LocalFileSystem()
        return self._fs

    def _path(self, name: str) -> str:
        full = self.join(name)
        return full.removeprefix("s3://") if self.is_s3 else full

    @property
    def s3(self):
        if self._s3 is None:
            import boto3

            from botocore.config import Config

            _check_endpoint_answers()
            # total_max_attempts counts tries, as pyarrow does (botocore's max_attempts counts retries)
            self._s3 = boto3.client("s3", config=Config(retries={"mode": "standard",
                                                                  "total_max_attempts": s3_attempts()}))
        return self._s3

    def bucket_exists(self) -> bool:
        """Whether the S3 bucket is there (a read of a missing bucket's key says "not found",
        like a missing key: a user read "holds no study.json" for a bucket name typo). True
        where the storage will not tell (HeadBucket needs s3:ListBucket on the whole bucket: a
        key scoped to a prefix gets 403)."""
        try:
            self.s3.head_bucket(Bucket=urlparse(self.uri).netloc)
        except Exception as e:  # noqa: BLE001 - botocore's ClientError, or storage unreachable
            code = str((getattr(e, "response", None) or {}).get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchBucket"):
                return False
            if code in ("403", "AccessDenied", "Forbidden"):
                return True
            raise InputError(self.uri, storage_error(e)) from None
        return True

    # -- bytes ------------------------------------------------------------------------
    def exists(self, name: str) -> bool:
        try:
            return self.fs.get_file_info(self._path(name)).type == pafs.FileType.File
        except OSError as e:  # pyarrow: bucket missing, access denied, endpoint unreachable
            raise InputError(self.join(name), storage_error(e)) from None

    def read_bytes(self, name: str) -> bytes:
        try:
            with self.fs.open_input_stream(self._path(name)) as f:
                return f.read()
        except FileNotFoundError:
            raise InputError(self.join(name), "missing") from None
        except OSError as e:
            raise InputError(self.join(name), storage_error(e)) from None

    def write_bytes(self, name: str, data: bytes, exclusive: bool = False) -> bool:
        """Write ``name`` whole or not at all. ``exclusive``: only if absent; False if it existed."""
        if self.is_s3:
            return self._put_s3(name, data, exclusive)
        try:
            return self._write_local(name, data, exclusive)
        except OSError as e:
            raise InputError(self.join(name), f"cannot write: {_local_write_error(self._path(name), e)}") from None

    def _write_local(self, name: str, data: bytes, exclusive: bool) -> bool:
        path = self._path(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=f".{os.path.basename(path)}.")
        os.fchmod(fd, _FILE_MODE)  # mkstemp makes 0600; artefacts get the mode any new file would
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            if not exclusive:
                os.replace(tmp, path)
                return True
            try:
                os.link(tmp, path)  # atomic, and fails if another writer got there first
                return True
            except FileExistsError:
                return False
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def write_parquet_batches(self, name: str, schema: pa.Schema, batches) -> int:
        """Stream tables into one Parquet file (a row group each), whole or not at all: written
        to a local temporary file, then renamed into place, or on S3 uploaded by boto3 (a
        multipart upload for a large file, invisible until it completes). Returns the rows
        written. Memory: one batch at a time."""
        rows = 0
        local = self._path(name) if not self.is_s3 else None
        folder = os.path.dirname(local) if local else None
        try:
            if folder:
                os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(name)}.")
        except OSError as e:
            raise InputError(self.join(name), f"cannot write: {_local_write_error(local or _tmp_path(), e)}") from None
        os.fchmod(fd, _FILE_MODE)
        os.close(fd)
        try:
            with pq.ParquetWriter(tmp, schema, write_page_checksum=True) as w:
                for t in batches:
                    w.write_table(t)
                    rows += t.num_rows
            if local:
                os.replace(tmp, local)
            else:
                self._upload_s3(name, tmp)
        except OSError as e:  # a full disk while streaming, a folder made read-only under us
            raise InputError(self.join(name), f"cannot write: {_local_write_error(local or tmp, e)}") from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return rows

    def _upload_s3(self, name: str, path: str) -> None:
        from boto3.exceptions import S3UploadFailedError
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = self._path(name).partition("/")
        try:
            self.s3.upload_file(path, bucket, key)
        except (BotoCoreError, ClientError, S3UploadFailedError) as e:
            raise InputError(self.join(name), storage_error(e)) from None

    def parquet_file(self, name: str) -> pq.ParquetFile:
        """``name`` opened for reading row group by row group (nothing read up front)."""
        try:
            return pq.ParquetFile(self.fs.open_input_file(self._path(name)))
        except FileNotFoundError:
            raise InputError(self.join(name), "missing") from None

    def _put_s3(self, name: str, data: bytes, exclusive: bool) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = self._path(name).partition("/")
        kw = {"IfNoneMatch": "*"} if exclusive else {}
        try:
            self.s3.put_object(Bucket=bucket, Key=key, Body=data, **kw)
            return True
        except ClientError as e:
            err = e.response.get("Error", {})
            if exclusive and err.get("Code", "") in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                return False
            raise InputError(self.join(name), f"storage refused the write ({err.get('Code')}: "
                             f"{err.get('Message', '')})") from None
        except BotoCoreError as e:  # no credentials, endpoint unreachable, ...
            raise InputError(self.join(name), storage_error(e)) from None

    def move(self, name: str, to: str) -> None:
        """Move ``name`` to ``to`` (both in this workspace), replacing what is there."""
        try:
            if self.is_s3:
                self.fs.move(self._path(name), self._path(to))
            else:
                os.makedirs(os.path.dirname(self._path(to)), exist_ok=True)
                os.replace(self._path(name), self._path(to))
        except OSError as e:
            raise InputError(self.join(name), f"cannot move it to {self.join(to)} ({e})") from None

    def delete(self, name: str) -> None:
        try:
            self.fs.delete_file(self._path(name))
        except FileNotFoundError:
            pass
        except OSError as e:  # a denied delete on S3 printed a traceback
            raise InputError(self.join(name), f"cannot delete it ({e})") from None

    def list(self, prefix: str = "", suffix: str = "", recursive: bool = False) -> list[str]:
        """Names of the files directly under ``prefix`` (with ``recursive``, in any folder under
        it), relative to this workspace, sorted."""
        base = self._path(prefix)
        sel = pafs.FileSelector(base, allow_not_found=True, recursive=recursive)
        try:
            infos = self.fs.get_file_info(sel)
        except OSError as e:
            raise InputError(self.join(prefix), storage_error(e)) from None
        out = []
        for info in infos:
            if info.type == pafs.FileType.File and info.base_name.endswith(suffix):
                name = info.path[len(base):].lstrip("/") if recursive else info.base_name
                out.append(f"{prefix.strip('/')}/{name}" if prefix else name)
        return sorted(out)

    def file_paths(self, names: list[str]) -> list[str]:
        """Paths of ``names`` for pyarrow readers that take ``filesystem=self.fs``."""
        return [self._path(n) for n in names]

    # -- typed artefacts --------------------------------------------------------------
    def require(self, name: str, hint: str) -> None:
        if not self.exists(name):
            raise InputError(self.join(name), f"missing; {hint}")

    def read_json(self, name: str, damaged: str = ""):
        """``name`` read as JSON; ``damaged``: what to do about a file that is not (said after it)."""
        try:
            return json.loads(self.read_bytes(name))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:  # bytes that are not text too (a second reader's)
            raise InputError(self.join(name), f"not valid JSON ({e}){damaged}") from None

    def write_json(self, name: str, obj) -> None:
        self.write_bytes(name, json.dumps(obj, indent=2, default=_json_default).encode())

    def read_text(self, name: str) -> str:
        return self.read_bytes(name).decode("utf-8")

    def write_text(self, name: str, text: str) -> None:
        self.write_bytes(name, text.encode("utf-8"))

    def read_parquet(self, name: str, data: bytes | None = None) -> pa.Table:
        """``name`` as a table; ``data``: its bytes, where the caller has read them already."""
        data = self.read_bytes(name) if data is None else data
        try:
            return pq.read_table(io.BytesIO(data))
        except (pa.ArrowException, OSError) as e:  # bytes read, not Parquet: a 41-line traceback (a user's finding)
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise InputError(self.join(name), f"not a readable Parquet file ({first}); `judgecal run` (or the stage "
                             "that writes it) writes it again") from None

    def write_parquet(self, name: str, table: pa.Table, exclusive: bool = False) -> bool:
        return self.write_bytes(name, parquet_bytes(table), exclusive)


def _tmp_path() -> str:
    return os.path.join(tempfile.gettempdir(), "x")


def _local_write_error(path: str, e: OSError) -> str:
    """What stopped a local write, in words: a file where a folder must be, a read-only folder,
    a full disk."""
    import errno

    if e.errno in (errno.ENOTDIR, errno.EEXIST):
        p = os.path.dirname(path)
        while p and p != os.path.dirname(p) and not os.path.exists(p):
            p = os.path.dirname(p)
        while p and p != os.path.dirname(p):  # the nearest ancestor that is not a folder
            if os.path.exists(p) and not os.path.isdir(p):
                return f"{p} is a file, not a folder (give [study].output a folder)"
            p = os.path.dirname(p)
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"permission denied in {os.path.dirname(path)} (a read-only folder?); give a writable [study].output"
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device (nothing was half-written); free space and rerun"
    return f"{e.strerror or type(e).__name__}" + (f" ({e.filename})" if e.filename else "")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()


def parquet_bytes(table: pa.Table) -> bytes:
    """A table as Parquet with page checksums (CRC32), so a page whose bytes changed on disk
    is refused when read, never read as other values (tests/test_fault_campaign.py)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, write_page_checksum=True)
    return sink.getvalue().to_pybytes()


def _json_default(x):
    import numpy as np

    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, (np.ndarray, tuple, set)):
        return list(x)
    raise TypeError(f"not JSON-serialisable: {type(x).__name__}")


S3_ATTEMPTS = 10  # S3 throttles with 503 SlowDown for seconds at a time: ride it out, with backoff


def s3_attempts() -> int:
    """Tries per S3 request, for boto3 and pyarrow alike: ``AWS_MAX_ATTEMPTS`` when set (the
    variable both AWS SDKs read), else :data:`S3_ATTEMPTS` (their defaults, 3, end a collect on
    a throttle of a few seconds: tests/test_fault_campaign.py)."""
    try:
        return max(1, int(os.environ.get("AWS_MAX_ATTEMPTS", S3_ATTEMPTS)))
    except ValueError:
        return S3_ATTEMPTS


def storage_error(e: BaseException) -> str:
    """A storage error in one line, with what to check where the client's words do not say it
    (pyarrow's ACCESS_DENIED "No response body" with no credentials at all: a user's finding)."""
    text = f"storage error ({e})" if isinstance(e, OSError) else f"storage error ({type(e).__name__}: {e})"
    if any(k in str(e) for k in ("ACCESS_DENIED", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch")):
        import boto3

        try:
            found = boto3.session.Session().get_credentials()
        except Exception as why:  # noqa: BLE001 - a profile that is not there (ProfileNotFound), said
            return f"{text}; the AWS credentials could not be read ({type(why).__name__}: {why})"
        if found is None:
            text += "; no AWS credentials were found (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or " \
                    "an instance role)"
    return text


def s3_endpoint() -> tuple[str, str] | None:
    """(the variable that sets it, the URL) of a custom S3 endpoint, or None for AWS's own. A
    value that is not an http(s) URL is refused naming the variable: pyarrow raised a bare
    ArrowInvalid traceback for 'htp://...', and read '127.0.0.1:9000' as https (a user's finding)."""
    for var in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        url = os.environ.get(var, "").strip()
        if url:
            u = urlparse(url)
            try:
                u.port  # noqa: B018 - raises on a port that is no number (or out of range)
            except ValueError:
                raise InputError(var, f"{url!r}: the port is not a number from 0 to 65535") from None
            if u.scheme not in ("http", "https") or not u.hostname:
                raise InputError(var, f"{url!r} is not an http:// or https:// URL (e.g. http://127.0.0.1:9000)")
            return var, url
    return None


_REACHED: set = set()  # endpoints this process has connected to once
# The CLI's own process sets it: a Ray worker keeps the clients' retries for an endpoint that
# is down for a moment mid-collect (the storage fault campaign), where failing at once would
# end the collect.
CHECK_ENDPOINT = False


def _check_endpoint_answers() -> None:
    """One TCP connection to a custom endpoint, once per process (the CLI's, see
    :data:`CHECK_ENDPOINT`): with nothing listening, pyarrow's and boto3's retries kept a
    command silent for 70-100 s before a storage error that never named the setting (a user's
    finding)."""
    if CHECK_ENDPOINT and (missed := unanswered_endpoint()):
        raise InputError(missed[0], f"{missed[1]}; is the S3 endpoint up, and is this its address?")


def unanswered_endpoint() -> tuple[str, str] | None:
    """(the variable, "URL: cannot connect (why)") where the custom S3 endpoint takes no TCP
    connection from this process, else None (no custom endpoint, or it answered once here)."""
    import socket

    found = s3_endpoint()
    if found is None or found[1] in _REACHED:
        return None
    var, url = found
    u = urlparse(url)
    try:
        socket.create_connection((u.hostname, u.port or (443 if u.scheme == "https" else 80)), timeout=5).close()
    except OSError as e:
        return var, f"{url}: cannot connect ({e.strerror or e})"
    _REACHED.add(url)
    return None


def _s3_options() -> dict:
    """pyarrow reads AWS_ENDPOINT_URL itself; a plain-http endpoint needs the scheme spelled out."""
    opts = {"retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=s3_attempts())}
    found = s3_endpoint()
    if found:
        u = urlparse(found[1])
        opts["endpoint_override"] = u.netloc
        opts["scheme"] = u.scheme
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        opts["region"] = region
    return opts
