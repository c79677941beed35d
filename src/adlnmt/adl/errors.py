"""The one error type of the ADL: a message plus where in the ADL text it happened."""

from __future__ import annotations

from adlnmt.errors import UserError


class ADLError(UserError, ValueError):
    """A fault in an ADL string (syntax, arguments, or a semantic check at build time).

    ``column`` is 0-based into ``text``; ``str(err)`` renders the line of the fault with a caret under it, and names
    the column within that line (and the line, when ``text`` has several).
    ``where`` names the part of the model ("encoder", "decoder", a preset, a variable ...).
    """

    def __init__(self, message: str, text: str = "", column: int | None = None, where: str = "") -> None:
        self.message = message
        self.text = text
        self.column = column
        self.where = where
        super().__init__(self.render())

    def located(self, text: str, where: str = "") -> ADLError:
        """This error re-anchored on ``text`` (kept if it already has one)."""
        if self.text:
            return self
        return ADLError(self.message, text, self.column, where or self.where)

    def render(self) -> str:
        head = f"ADL error in {self.where}: " if self.where else "ADL error: "
        text = self.text or ""  # None from a caller that had no text
        column = min(self.column if self.column is not None else 0, len(text))
        # Show the line holding the fault (ADL strings may span lines in YAML files); the column counts within it.
        line_start = text.rfind("\n", 0, column) + 1
        if self.column is None:
            head += self.message
        elif "\n" in text:
            line_number = text.count("\n", 0, column) + 1
            head += f"{self.message} (line {line_number}, column {column - line_start + 1})"
        else:
            head += f"{self.message} (column {self.column + 1})"
        if not text:
            return head
        line_end = text.find("\n", column)
        # Tabs stay (in the caret's indent too, so that it lines up however wide the terminal shows them); other
        # whitespace (\r, \f, no-break or ideographic spaces) shows as one space.
        line = "".join(_shown(char) for char in text[line_start : line_end if line_end >= 0 else None])
        indent = "".join("\t" if char == "\t" else " " for char in line[: column - line_start])
        caret = indent + "^" if self.column is not None else ""
        return f"{head}\n  {line}\n  {caret}".rstrip() + "\n"

    def __str__(self) -> str:
        return self.render()

    def message_for_user(self) -> str:
        return self.render().rstrip()


def _shown(char: str) -> str:
    """A character of the faulty line as the message shows it: tabs kept, any other whitespace one space."""
    return char if char == "\t" or not char.isspace() else " "
