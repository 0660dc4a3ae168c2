"""Refusals the caller can act on, raised by the retrieval layer and rendered by the REST layer."""


class Rejected(Exception):
    """`code` and `field` go into the error envelope; `status` is the HTTP status."""

    def __init__(self, code: str, message: str, field: str | None = None, status: int = 409):
        super().__init__(message)
        self.code, self.message, self.field, self.status = code, message, field, status
