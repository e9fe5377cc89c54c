"""`python manage.py bundle_signing_key`: this deployment's public key (what other deployments trust).

python manage.py bundle_signing_key                 # prints the public key of BUNDLE_SIGNING_KEY
python manage.py bundle_signing_key --new key.pem   # a new private key (mode 600), for BUNDLE_SIGNING_KEY_FILE
"""

import os

from django.core.management.base import BaseCommand, CommandError

from rolloutlab.audit.signing import deployment_key
from workers.bundle import new_signing_key, public_key_text, signing_key_pem


class Command(BaseCommand):
    help = "Print this deployment's bundle-signing public key, or write a new private key"

    def add_arguments(self, parser):
        parser.add_argument("--new", metavar="FILE", help="write a new Ed25519 private key (PEM) to FILE")

    def handle(self, *args, new=None, **options):
        if new is None:
            self.stdout.write(public_key_text(deployment_key()))
            return
        key = new_signing_key()
        try:
            fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise CommandError(f"{new}: already exists") from None
        with os.fdopen(fd, "w") as handle:
            handle.write(signing_key_pem(key))
        self.stdout.write(f"wrote {new}; set BUNDLE_SIGNING_KEY_FILE={new}. Its public key: {public_key_text(key)}")
