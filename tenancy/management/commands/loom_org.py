from django.core.management.base import BaseCommand, CommandError

from tenancy.models import NAME_PATTERN, NAME_RULE, Org


class Command(BaseCommand):
    help = "Create or list organisations."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create an org")
        create.add_argument("name")
        sub.add_parser("list", help="list orgs")

    def handle(self, *args, action, **options):
        if action == "create":
            name = options["name"]
            if not NAME_PATTERN.fullmatch(name):
                raise CommandError(f"org name must be {NAME_RULE}")
            org, created = Org.objects.get_or_create(name=name)
            self.stdout.write(f"{'created' if created else 'exists'}: org {org.name}")
        else:
            for org in Org.objects.order_by("name"):
                self.stdout.write(f"{org.name}\t{org.tokens.active().count()} active tokens")
