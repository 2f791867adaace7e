"""The names of the a2a-x402 extension (https://github.com/google-a2a/a2a-x402): the metadata
keys a payment's messages carry and the values of ``x402.payment.status``."""

from __future__ import annotations

from enum import StrEnum

PAYMENT_STATUS = "x402.payment.status"
PAYMENT_REQUIRED = "x402.payment.required"
PAYMENT_PAYLOAD = "x402.payment.payload"
PAYMENT_RECEIPTS = "x402.payment.receipts"
PAYMENT_ERROR = "x402.payment.error"


class PaymentState(StrEnum):
    """The values of ``x402.payment.status`` (all six the extension defines)."""

    REQUIRED = "payment-required"
    SUBMITTED = "payment-submitted"
    REJECTED = "payment-rejected"
    VERIFIED = "payment-verified"
    COMPLETED = "payment-completed"
    FAILED = "payment-failed"
