"""Data classes (docs/grants.md, "Taint and untrusted"), ordered public < private < secret. Stored as
small integers so that "never goes down" is a single max() in SQL."""

from django.db import models


class DataClass(models.IntegerChoices):
    PUBLIC = 0, "public"
    PRIVATE = 1, "private"
    SECRET = 2, "secret"

    @classmethod
    def parse(cls, name: str) -> "DataClass":
        for member in cls:
            if member.label == name:
                return member
        raise ValueError(f"unknown data class {name!r}; expected one of public, private, secret")
