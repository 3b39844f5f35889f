from celery import shared_task

from controlplane.memory.services import notes_purge_expired


@shared_task(ignore_result=True)
def purge_expired_notes() -> int:
    """Beat: notes past their scope's retention are forgotten (audited, by `retention`)."""
    return notes_purge_expired()
