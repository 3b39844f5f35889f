from celery import shared_task

from controlplane.journal.services import purge_expired


@shared_task(ignore_result=True)
def purge_expired_journal() -> int:
    """Beat: journal bodies past ROSTER_JOURNAL_RETENTION_DAYS lose their bytes (audited)."""
    return purge_expired()
