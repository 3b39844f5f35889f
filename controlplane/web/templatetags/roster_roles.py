"""`{% load roster_roles %}{% if user|is_admin %}`: the one admin test (controlplane.core.roles.is_admin) in
templates, for links to pages only admins may open (memory governance, repairs)."""

from __future__ import annotations

from django import template

from controlplane.core.roles import is_admin as _is_admin

register = template.Library()


@register.filter
def is_admin(user) -> bool:
    return _is_admin(user)
