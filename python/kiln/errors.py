"""Kiln's errors in Python: one exception type carrying Kiln's one-line message and its kind.

The kinds and codes are those of runtime/error.h (the `kiln` command's exit codes)."""

# code -> kind, as runtime/error.h's errorKindName spells them.
KINDS = {
    2: "usage",
    3: "invalid-model",
    4: "unsupported",
    5: "invalid-input",
    6: "io",
    7: "kernel-fault",
    8: "unknown-target",
    9: "incompatible-module",
    10: "store",
    70: "internal",
}


class KilnError(Exception):
    """A diagnostic from Kiln: `message` (one line), `kind` ("unsupported", ...) and `code`."""

    def __init__(self, message, kind="internal", code=70):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.code = code

    @classmethod
    def from_code(cls, message, code):
        return cls(message, KINDS.get(code, "internal"), code)

    def __repr__(self):
        return f"KilnError({self.message!r}, kind={self.kind!r}, code={self.code})"
