"""The three human roles as Django groups, kept in step with the code after every migrate.
Admins: everything in the admin. Approvers: decide approvals, read what they need to judge.
Auditors: read and export, change nothing."""

from django.contrib.auth.models import Group, Permission

ROSTER_APPS = ["fleet", "vault", "policy", "ledger", "audit", "approvals", "proposals", "conversations",
               "agents"]
ADMINS, APPROVERS, AUDITORS = "Admins", "Approvers", "Auditors"

APPROVER_PERMS = [
    ("approvals", "decide_approval"), ("approvals", "view_approval"), ("fleet", "view_run"),
    ("fleet", "view_worker"), ("policy", "view_grant"), ("proposals", "view_proposal"),
    ("proposals", "view_destination"), ("conversations", "view_channel"),
]


# Append-only records: nobody edits them, not even admins (the database refuses it as well).
APPEND_ONLY_MODELS = [("audit", "auditrecord"), ("audit", "modeltrace"), ("ledger", "spendline")]


def _admin_perms():
    perms = Permission.objects.filter(content_type__app_label__in=ROSTER_APPS + ["auth"])
    for app, model in APPEND_ONLY_MODELS:
        perms = perms.exclude(content_type__app_label=app, content_type__model=model,
                              codename__regex=r"^(add|change|delete)_")
    return perms


def _auditor_perms():
    perms = Permission.objects.filter(content_type__app_label__in=ROSTER_APPS, codename__startswith="view_")
    return list(perms.exclude(content_type__model="secret")) + list(
        Permission.objects.filter(content_type__app_label="audit", codename="export_auditrecord")
    )


def ensure_roles(**_kwargs) -> None:
    admins, _ = Group.objects.get_or_create(name=ADMINS)
    admins.permissions.set(_admin_perms())
    approvers, _ = Group.objects.get_or_create(name=APPROVERS)
    approvers.permissions.set(
        [p for app, code in APPROVER_PERMS for p in Permission.objects.filter(
            content_type__app_label=app, codename=code)]
    )
    auditors, _ = Group.objects.get_or_create(name=AUDITORS)
    auditors.permissions.set(_auditor_perms())


def is_admin(user) -> bool:
    """An active member of Admins (or a superuser): the one test for acting on a subject's request (memory
    governance, repairs; docs/memory.md). Approvers and auditors are never admins, staff flag or not."""
    return bool(getattr(user, "is_active", False) and (
        user.is_superuser or user.groups.filter(name=ADMINS).exists()))
