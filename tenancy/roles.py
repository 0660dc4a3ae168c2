"""Roles, ordered: each one may do everything the roles before it may."""

from enum import IntEnum


class Role(IntEnum):
    VIEWER = 1  # reads
    WRITER = 2  # reads + writes
    ADMIN = 3  # + org and namespace management, the model-call switch

    @classmethod
    def parse(cls, name: str) -> "Role":
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(f"unknown role {name!r} (use viewer, writer or admin)") from None

    @property
    def label(self) -> str:
        return self.name.lower()


CHOICES = [(role.label, role.label) for role in Role]
