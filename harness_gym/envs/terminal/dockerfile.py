"""Dockerfiles read as Docker's builder reads them: a structured instruction list.

:func:`parse_dockerfile` turns the text into :class:`Instruction` values (``FROM``, ``RUN``,
``COPY``/``ADD``, ``ENV``, ``WORKDIR``, ``USER``, ``CMD``/``ENTRYPOINT``, ...) with the
rules of the Dockerfile reference (https://docs.docker.com/reference/dockerfile/): parser
directives (``# escape=``), line continuations (a comment or empty line inside a continued
``RUN`` is dropped, as BuildKit drops it), JSON (exec) and shell forms, ``--flag=value``
options and BuildKit here-documents (``RUN <<EOF ... EOF``, ``COPY <<EOF /path``, ``<<-``
tab stripping, quoted delimiters). :func:`expand` substitutes ``$VAR``, ``${VAR}``,
``${VAR:-default}`` and ``${VAR:+alt}`` from the ``ARG``/``ENV`` values seen so far.

Build-context helpers: :func:`read_dockerignore` / :func:`ignored` follow ``.dockerignore``
(``**``, ``!`` exceptions, the last matching line wins), :func:`context_sources` expands
``COPY``/``ADD`` sources with Docker's globs (``*`` and ``?`` never cross ``/``; dot files
match) and :func:`shell_commands` lists the commands a ``RUN`` line starts, so that a path
word such as ``/app/payment-service`` is never taken for the ``service`` command.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

#: Instructions of the Dockerfile reference.
KNOWN = frozenset(
    "ADD ARG CMD COPY ENTRYPOINT ENV EXPOSE FROM HEALTHCHECK LABEL MAINTAINER ONBUILD RUN SHELL "
    "STOPSIGNAL USER VOLUME WORKDIR".split()
)
#: Instructions whose arguments take ``$VAR`` substitution (the reference's list).
EXPANDED = frozenset("ADD COPY ENV EXPOSE FROM LABEL STOPSIGNAL USER VOLUME WORKDIR".split())
#: The PATH a Debian-based image starts with (Docker's default for Linux images).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Archives that ``ADD`` unpacks (local sources only).
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst")


class DockerfileError(ValueError):
    """A Dockerfile that cannot be read; the message names the line."""


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: ``kind`` (upper case), its ``args`` text (continuations
    joined, comments dropped), its first ``line`` (1-based), ``--flag`` options, and the
    bodies of its here-documents (name -> text)."""

    kind: str
    args: str
    line: int
    flags: dict[str, str] = field(default_factory=dict)
    heredocs: dict[str, str] = field(default_factory=dict)

    @property
    def exec_form(self) -> list[str] | None:
        """The JSON-array form's words (``CMD ["a", "b"]``), or ``None`` for the shell form."""
        text = self.args.strip()
        if not text.startswith("["):
            return None
        try:
            words = json.loads(text)
        except ValueError:
            return None  # Docker then reads it as the shell form
        return [str(w) for w in words] if isinstance(words, list) else None

    def words(self) -> list[str]:
        """The arguments split as the builder splits them (exec form, else shell words)."""
        form = self.exec_form
        if form is not None:
            return form
        try:
            return shlex.split(self.args, comments=False, posix=True)
        except ValueError as err:
            raise DockerfileError(f"line {self.line}: {self.kind} {self.args[:60]}: {err}") from None

    def __str__(self) -> str:
        return f"line {self.line}: {self.kind} {self.args}".rstrip()


_HEREDOC = re.compile(r"<<(-?)([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")
_FLAG = re.compile(r"--([a-z][a-z-]*)(?:=(\S*))?")
_DIRECTIVE = re.compile(r"#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$")


def parse_dockerfile(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile's text, in order."""
    lines = text.replace("\r\n", "\n").split("\n")
    escape, start = "\\", 0
    for start, raw in enumerate(lines):  # parser directives: only before anything else
        found = _DIRECTIVE.match(raw.strip())
        if not found:
            break
        if found.group(1).lower() == "escape":
            escape = found.group(2)
            if escape not in ("\\", "`"):
                raise DockerfileError(f"line {start + 1}: escape must be \\ or `, got {escape!r}")
    else:
        start = len(lines)
    out: list[Instruction] = []
    i = start
    while i < len(lines):
        raw = lines[i]
        if not raw.strip() or raw.lstrip().startswith("#"):
            i += 1
            continue
        first, parts = i + 1, []
        line = raw
        while True:
            stripped = line.rstrip()
            if stripped.endswith(escape) and not stripped.endswith(escape * 2):
                parts.append(stripped[: -len(escape)])
                i += 1
                while i < len(lines) and (not lines[i].strip() or lines[i].lstrip().startswith("#")):
                    i += 1  # comment and empty lines inside a continuation are dropped
                if i >= len(lines):
                    break
                line = lines[i]
                continue
            parts.append(line)
            i += 1
            break
        joined = "".join(parts).strip()
        word, _, rest = joined.partition(" ")
        kind, rest = word.upper(), rest.strip()
        if "\t" in word:
            word, _, more = word.partition("\t")
            kind, rest = word.upper(), (more + " " + rest).strip()
        heredocs: dict[str, str] = {}
        if kind in ("RUN", "COPY", "ADD"):
            for strip_tabs, _, name in _HEREDOC.findall(rest):
                body: list[str] = []
                while i < len(lines) and lines[i].rstrip("\n") != name:
                    if strip_tabs and lines[i].lstrip("\t").rstrip() == name:
                        break
                    body.append(lines[i].lstrip("\t") if strip_tabs else lines[i])
                    i += 1
                if i >= len(lines):
                    raise DockerfileError(f"line {first}: here-document <<{name} is never closed")
                i += 1  # the delimiter line
                heredocs[name] = "\n".join(body) + "\n"
        flags: dict[str, str] = {}
        while rest.startswith("--"):
            found = _FLAG.match(rest)
            if not found:
                break
            flags[found.group(1)] = found.group(2) or ""
            rest = rest[found.end() :].lstrip()
        out.append(Instruction(kind, rest, first, flags, heredocs))
    return out


_VAR = re.compile(r"\\\$|\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?([-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def expand(text: str, variables: dict[str, str]) -> str:
    """``text`` with ``$VAR``, ``${VAR}``, ``${VAR:-default}`` and ``${VAR:+alt}`` replaced
    from ``variables`` (unknown names become empty, as in Docker; ``\\$`` stays ``$``)."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "\\$":
            return "$"
        name = m.group(1) or m.group(4)
        value = variables.get(name)
        if m.group(2) == "-":
            return value if value else m.group(3)
        if m.group(2) == "+":
            return m.group(3) if value else ""
        return value or ""

    return _VAR.sub(one, text)


def parse_assignments(ins: Instruction, variables: dict[str, str]) -> dict[str, str]:
    """The ``KEY=value`` pairs of an ``ENV``/``ARG``/``LABEL`` (and the legacy
    ``ENV KEY value with spaces``), each value expanded with what came before it."""
    text = ins.args.strip()
    pairs: dict[str, str] = {}
    if ins.kind == "ENV" and text and "=" not in text.split(None, 1)[0]:
        key, _, value = text.partition(" ")  # legacy form: one variable, the rest is its value
        pairs[key] = expand(value.strip(), variables)
        return pairs
    try:
        lexer = shlex.shlex(text, posix=True)
        lexer.whitespace_split, lexer.commenters, lexer.escapedquotes = True, "", "\"'"
        words = list(lexer)
    except ValueError as err:
        raise DockerfileError(f"{ins}: {err}") from None
    # shlex removes the quotes; the raw text decides substitution, so expand on the raw words
    raw_words = re.findall(r"(?:[^\s\"']+|\"(?:\\.|[^\"\\])*\"|'[^']*')+", text)
    seen = dict(variables)
    for word, raw in zip(words, raw_words, strict=False):
        key, eq, value = word.partition("=")
        if not eq:
            if ins.kind == "ARG":
                pairs.setdefault(key, seen.get(key, ""))
                continue
            raise DockerfileError(f"{ins}: {word!r} is not KEY=value")
        raw_value = raw.partition("=")[2]
        if raw_value.startswith("'") and raw_value.endswith("'"):
            pairs[key] = value  # single quotes: no substitution
        else:
            pairs[key] = expand(_unquote(raw_value), seen)
        seen[key] = pairs[key]
    return pairs


def _unquote(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return re.sub(r"\\(.)", r"\1", raw[1:-1])
    return raw


# -- build context --------------------------------------------------------------------------


def read_dockerignore(context: Path) -> list[tuple[bool, re.Pattern[str]]]:
    """The patterns of ``context/.dockerignore``: (is an exception ``!``, compiled pattern)."""
    path = context / ".dockerignore"
    if not path.is_file():
        return []
    out = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        line = line[1:].strip() if negate else line
        clean = os.path.normpath(line.lstrip("/")) if line.strip("/") else ""
        if not clean or clean == ".":
            continue
        out.append((negate, re.compile(_glob_regex(clean) + r"(?:/.*)?\Z")))
    return out


def ignored(rel: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether the context path ``rel`` (``a/b.txt``) is left out by ``.dockerignore``: the
    last pattern matching it (or a folder above it) decides."""
    result = False
    for negate, pattern in patterns:
        if pattern.match(rel):
            result = not negate
    return result


def _glob_regex(pattern: str) -> str:
    """A regular expression for a Docker (Go ``filepath.Match`` plus ``**``) pattern."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):
                i += 1
                out.append(r"(?:.*/)?")
            else:
                out.append(r".*")
            continue
        if c == "*":
            out.append(r"[^/]*")
        elif c == "?":
            out.append(r"[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                body = "^" + body[1:] if body.startswith("^") or body.startswith("!") else body
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def context_sources(context: Path, source: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> list[str]:
    """The context paths (relative, ``/``-separated) a ``COPY``/``ADD`` source names: a
    file, a folder, or a glob; ``.dockerignore``'d paths left out. Raises
    :class:`DockerfileError` when nothing matches or a source leaves the context."""
    clean = os.path.normpath(source.lstrip("/")) if source.strip("/") else "."
    if clean == ".." or clean.startswith("../"):
        raise DockerfileError(f"{source} lies outside the build context")
    if any(c in clean for c in "*?["):
        found = sorted(glob.glob(clean, root_dir=context, include_hidden=True))
    else:
        found = [clean] if os.path.lexists(context / clean) else []
    found = [f for f in found if f == "." or not ignored(f, patterns)]
    if not found:
        raise DockerfileError(f"{source}: no such file in the build context (after .dockerignore)")
    return found


def context_files(context: Path, rel: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> list[str]:
    """Every file under the context path ``rel`` (itself when a file), ignored ones left out;
    relative to ``rel`` (``""`` for ``rel`` itself as a file). Symlinks are listed, never followed."""
    base = context / rel
    if base.is_symlink() or not base.is_dir():
        return [""]
    out = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames.sort()
        here = os.path.relpath(dirpath, context)
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            ctx_rel = os.path.normpath(os.path.join(here, name))
            if not ignored(ctx_rel, patterns):
                out.append(os.path.relpath(os.path.join(dirpath, name), base))
    return sorted(out)


def is_archive(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def join_dest(workdir: str, dest: str) -> str:
    """The absolute image path of a ``COPY``/``WORKDIR`` destination (relative to ``workdir``);
    a trailing ``/`` is kept."""
    path = dest if dest.startswith("/") else f"{workdir.rstrip('/')}/{dest}"
    norm = str(PurePosixPath(os.path.normpath(path)))
    return norm + ("/" if dest.endswith("/") and norm != "/" else "")


# -- RUN lines ------------------------------------------------------------------------------

_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", "\n", ";;", "|&", "{", "}"})
#: Words that run the next word as the command (``sudo apt-get``, ``env X=1 pip``).
_WRAPPERS = frozenset(
    {
        "sudo",
        "env",
        "nohup",
        "time",
        "exec",
        "command",
        "nice",
        "timeout",
        "xargs",
        "then",
        "do",
        "else",
        "elif",
        "if",
        "while",
        "until",
        "!",
    }
)


def shell_commands(script: str) -> list[list[str]]:
    """The simple commands a shell script starts, as word lists (first word: the command),
    assignments and wrappers (``sudo``, ``env``, ``if``, ...) skipped. Only command
    positions count: ``mkdir /app/payment-service`` starts ``mkdir``, never ``service``."""
    # a newline ends a command; the separator goes after it so that a comment (which runs
    # to the end of its line) never swallows it
    text = script.replace("\\\n", " ").replace("\n", "\n ; ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote: plain words are still a fair reading
        tokens = text.split()
    out: list[list[str]] = []
    current: list[str] = []
    for word in tokens + [";"]:
        if word in _SEPARATORS or (word and set(word) <= set(";&|()")):
            if current:
                out.append(current)
            current = []
            continue
        if not current and (word in _WRAPPERS or re.match(r"[A-Za-z_][A-Za-z0-9_]*=", word)):
            continue
        current.append(word)
    return [c for c in out if c]
