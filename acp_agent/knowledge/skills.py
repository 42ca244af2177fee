"""Agent Skills: folders with a `SKILL.md` the model reads when a task calls for one.

Where they are found, nearest first (a name found twice is taken from the nearer place; the
farther one is listed as shadowed):

1. the project: `.agents/skills/*/SKILL.md`, then `.claude/skills/*/SKILL.md`, in the cwd
   and in every parent up to the project root (never above it);
2. the user: our config directory's `skills/`, then `~/.agents/skills/`, then
   `~/.claude/skills/` (ours first, as `.agents` comes before `.claude`: the most specific
   place wins).

A `SKILL.md` opens with YAML front matter holding `name` and `description`, both non-empty
text; only the front matter (the first 64 KiB) is read, however large the file. A name is
one word (`[A-Za-z0-9][A-Za-z0-9._:-]*`, at most 64 characters) so that `$name` can ask for
it; a name that differs from its folder's is accepted with a warning. A file that cannot be
used is skipped with a warning naming it; a project skill whose symlinks lead outside the
project is skipped too. The same file reached twice (`.claude/skills` linked to
`.agents/skills`) counts once.

The model is told each skill's name, description and `SKILL.md` path (`render_skills`), never
its body: it reads the body with read_file when it needs it (progressive disclosure).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from acp_agent.knowledge._front_matter import read_document
from acp_agent.knowledge._places import (
    Place,
    escapes,
    list_directory,
    nearest_wins,
    printable,
    project_places,
    real_path,
)

SKILL_FILE = "SKILL.md"
SKILL_DIRECTORIES = (Path(".agents", "skills"), Path(".claude", "skills"))
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
SHORT_DESCRIPTION = 100
"""Characters a description is cut to when the full list does not fit the budget."""
LONGEST_DESCRIPTION = 1024
"""The Agent Skills limit; a longer description is cut even when the budget has room."""


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str  # whitespace runs collapsed to one space: it stands on one line
    path: Path  # absolute path of its SKILL.md, symlinks followed
    scope: Literal["project", "user"]


@dataclass(frozen=True, slots=True)
class SkillCatalog:
    skills: tuple[Skill, ...]  # in effect, sorted by name
    shadowed: tuple[Skill, ...]  # same name found farther away
    warnings: tuple[str, ...]  # files skipped, and why (path named)

    def find(self, name: str) -> Skill | None:
        return next((skill for skill in self.skills if skill.name == name), None)

    def paths(self) -> frozenset[Path]:
        """Every SKILL.md in effect: read_file reads these without asking."""
        return frozenset(skill.path for skill in self.skills)


def discover_skills(
    cwd: Path, project_root: Path, *, home: Path, user_config_dir: Path | None
) -> SkillCatalog:
    warnings: list[str] = []
    found: list[Skill] = []  # nearest first
    seen: set[Path] = set()
    for place in _places(cwd, project_root, home=home, user_config_dir=user_config_dir):
        for folder_name, skill_file in _skill_files(place, warnings):
            if skill_file in seen:
                continue
            seen.add(skill_file)
            skill = _read_skill(skill_file, folder_name, place, warnings)
            if skill is not None:
                found.append(skill)
    in_effect, shadowed = nearest_wins(found, lambda skill: skill.name)
    return SkillCatalog(skills=in_effect, shadowed=shadowed, warnings=tuple(warnings))


def _places(
    cwd: Path, project_root: Path, *, home: Path, user_config_dir: Path | None
) -> list[Place]:
    places = project_places(cwd, project_root, SKILL_DIRECTORIES, every_level=True)
    if user_config_dir is not None:
        places.append(Place(user_config_dir / "skills", "user", None))
    places += [Place(home / skills, "user", None) for skills in SKILL_DIRECTORIES]
    return places


def _skill_files(place: Place, warnings: list[str]) -> Iterator[tuple[str, Path]]:
    """Each usable `<folder>/SKILL.md` in `place`: the folder's name as listed (a symlink's
    own name, not its target's) and the file's real path."""
    for entry in list_directory(place.directory, warnings):
        folder = Path(entry.path)
        if not printable(entry.name):
            warnings.append(f"{folder!r}: skipped: its name has control characters")
            continue
        try:
            skill_file = real_path(folder / SKILL_FILE)
        except FileNotFoundError:
            if entry.is_symlink() and not folder.exists():
                warnings.append(f"{folder}: skipped: a symlink to nothing")
            continue  # a file, or a folder without a SKILL.md: not a skill
        except NotADirectoryError:
            continue
        except OSError as error:  # a symlink loop, a folder we may not enter
            warnings.append(f"{folder / SKILL_FILE}: skipped: {error.strerror or error}")
            continue
        if escapes(skill_file, place):
            warnings.append(
                f"{folder / SKILL_FILE}: skipped: it leads outside the project, to {skill_file}"
            )
            continue
        yield entry.name, skill_file


def _read_skill(path: Path, folder: str, place: Place, warnings: list[str]) -> Skill | None:
    document = read_document(path, body_limit=None)
    if document.problem is not None:
        warnings.append(f"{path}: skipped: {document.problem}")
        return None
    if document.fields is None:
        warnings.append(f"{path}: skipped: it has no front matter (`---`, name, description)")
        return None
    name, description = document.fields.get("name"), document.fields.get("description")
    if not isinstance(name, str) or not name.strip():
        warnings.append(f"{path}: skipped: its front matter has no `name`")
        return None
    if not isinstance(description, str) or not description.strip():
        warnings.append(f"{path}: skipped: its front matter has no `description`")
        return None
    name = name.strip()
    if NAME_PATTERN.fullmatch(name) is None:
        warnings.append(
            f"{path}: skipped: its name {name!r} is not one word of letters, digits, "
            "'.', '_', ':' or '-' (at most 64 characters)"
        )
        return None
    if name != folder:
        warnings.append(f"{path}: its name {name!r} differs from its folder {folder!r}")
    return Skill(name, " ".join(description.split()), path, place.scope)


# --- The system prompt section -------------------------------------------------------------

_HEADER = """\
## Skills

A skill is a folder of instructions (and perhaps scripts and resources) for one kind of task. \
Each line below names a skill, says when it applies and gives the absolute path of its SKILL.md. \
When a task matches a skill's description, or the user asks for a skill, first read its \
SKILL.md with read_file, then follow it; never guess what a skill says from its name or \
description. Paths inside a SKILL.md are relative to its folder."""

_LEFT_OUT = "({count} more {skills} not listed here for lack of room; /skills lists them all.)"


def render_skills(
    catalog: SkillCatalog, budget_tokens: int, count_tokens: Callable[[str], int]
) -> str:
    """The system prompt section ("" when no skills): what skills are and that the model reads
    a skill's SKILL.md with read_file before using it (never guess its content), then one line
    per skill: name, description, path. Within budget_tokens: first descriptions are shortened
    (to ~100 chars, then to nothing), then skills are left out (farthest scope first, then by
    name) with a note saying how many and that /skills lists them all.

    "" as well when not even the heading and one skill fit. Skills are left out from the end:
    user skills before project skills, and within a scope the last by name first."""
    skills = catalog.skills
    if not skills:
        return ""
    for width in (LONGEST_DESCRIPTION, SHORT_DESCRIPTION):
        text = _section(skills, width, left_out=0)
        if count_tokens(text) <= budget_tokens:
            return text
    # Keep the skills that stay longest: project before user, then by name.
    kept_first = sorted(skills, key=lambda skill: (skill.scope != "project", skill.name))
    fits = _most_that_fit(kept_first, budget_tokens, count_tokens)
    if fits == 0:
        return ""
    kept = sorted(kept_first[:fits], key=lambda skill: skill.name)
    return _section(tuple(kept), 0, left_out=len(skills) - fits)


def _most_that_fit(
    kept_first: list[Skill], budget_tokens: int, count_tokens: Callable[[str], int]
) -> int:
    """How many of `kept_first` (a prefix, names and paths only) fit the budget with the note.
    A binary search: the count of tokens grows with every line added."""
    low, high = 0, len(kept_first)  # low always fits (0 trivially); find the largest that does
    while low < high:
        middle = (low + high + 1) // 2
        text = _section(tuple(kept_first[:middle]), 0, left_out=len(kept_first) - middle)
        if count_tokens(text) <= budget_tokens:
            low = middle
        else:
            high = middle - 1
    return low


def _section(skills: tuple[Skill, ...], width: int, *, left_out: int) -> str:
    lines = [_HEADER, "", *(_line(skill, width) for skill in skills)]
    if left_out:
        noun = "skill" if left_out == 1 else "skills"
        lines += ["", _LEFT_OUT.format(count=left_out, skills=noun)]
    return "\n".join(lines) + "\n"


def _line(skill: Skill, width: int) -> str:
    description = _shorten(skill.description.strip(), width)
    if not description:
        return f"- {skill.name} ({skill.path})"
    return f"- {skill.name}: {description} ({skill.path})"


def _shorten(text: str, width: int) -> str:
    """`text` cut to at most `width` characters, at a word boundary when one is near, ending
    with an ellipsis when cut."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ""
    cut = text[: width - 1]
    space = cut.rfind(" ")
    if space >= width * 2 // 3:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


# --- Explicit requests ---------------------------------------------------------------------

# Code is not a request: `echo $deploy` in a pasted script does not ask for a skill.
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)
# `$name` or `/skill:name` at a word start: not `a$name`, `$$name` or `docs/skill:x`.
_REQUEST = re.compile(r"(?<![\w$/\\])(?:\$|/skill:)([A-Za-z0-9][A-Za-z0-9._:-]*)")
_TRAILING_PUNCTUATION = ".:-_"


def requested_skills(prompt_text: str, catalog: SkillCatalog) -> list[Skill]:
    """Skills the user asked for by `$name` or `/skill:name` in the prompt (word boundaries;
    unknown names ignored). In the order first asked for, each once; not inside `code`."""
    requested: list[Skill] = []
    for match in _REQUEST.finditer(_CODE.sub(" ", prompt_text)):
        skill = _known_prefix(match[1], catalog)
        if skill is not None and skill not in requested:
            requested.append(skill)
    return requested


def _known_prefix(word: str, catalog: SkillCatalog) -> Skill | None:
    """The skill `word` names, allowing for punctuation after it ("use $pdf." or "$pdf:")."""
    while word:
        skill = catalog.find(word)
        if skill is not None or word[-1] not in _TRAILING_PUNCTUATION:
            return skill
        word = word[:-1]
    return None
