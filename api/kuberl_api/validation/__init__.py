"""Turning YAML a user wrote into a typed job, or into every problem it has at once."""

from kuberl_api.validation.documents import Document, DocumentKind, load_documents, parse_document
from kuberl_api.validation.problems import Problem, Severity, SpecInvalid
from kuberl_api.validation.validate import ValidationResult, validate_document

__all__ = [
    "Document",
    "DocumentKind",
    "Problem",
    "Severity",
    "SpecInvalid",
    "ValidationResult",
    "load_documents",
    "parse_document",
    "validate_document",
]
