"""A handler for examples/worker.py, standing in for real work: it "sends" the email a job describes.

    QUEUE=emails HANDLER=examples/send_mail.py:send_mail python3 examples/worker.py

The job's payload is e.g. {"to": "ada@example.com"}; what the function returns becomes the job's
result. An exception nacks the job (the queue's backoff decides the retry); PermanentFailure, from
the library (clients/python), sends it to dead at once.
"""

from baton import PermanentFailure


def send_mail(job):
    to = job.payload.get("to") if isinstance(job.payload, dict) else None
    if not to:
        # Retrying cannot add an address: give up on this job now.
        raise PermanentFailure('payload has no "to" address')
    # The real work goes here: smtplib, or a call to your mail provider's API.
    return {"sent_to": to}
