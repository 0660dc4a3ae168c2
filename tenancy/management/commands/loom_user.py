import secrets
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from tenancy.models import Membership, Org
from tenancy.roles import Role


class Command(BaseCommand):
    help = "Dashboard users (the Recall Lab) and their role in an org: create, list, set-role, remove."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        roles = [role.label for role in Role]
        create = sub.add_parser("create", help="a user with a role in an org (a new user's password is printed once)")
        create.add_argument("username")
        create.add_argument("--org", required=True)
        create.add_argument("--role", required=True, choices=roles)
        create.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
        listing = sub.add_parser("list", help="users and their roles")
        listing.add_argument("--org")
        set_role = sub.add_parser("set-role", help="change a user's role in an org")
        set_role.add_argument("username")
        set_role.add_argument("--org", required=True)
        set_role.add_argument("--role", required=True, choices=roles)
        remove = sub.add_parser("remove", help="take a user out of an org (the user stays; log in reaches no org)")
        remove.add_argument("username")
        remove.add_argument("--org", required=True)

    def handle(self, *args, action, **options):
        getattr(self, f"_{action.replace('-', '_')}")(**options)

    def _create(self, username, org, role, password_stdin, **_):
        found = _org(org)
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is not None and Membership.objects.filter(user=user, org=found).exists():
            raise CommandError(f"{username} is already in org {org}; change the role with: loom_user set-role")
        password = None
        if user is None:
            password = sys.stdin.readline().rstrip("\n") if password_stdin else secrets.token_urlsafe(12)
            user = User(username=username)
            try:
                validate_password(password, user)
            except ValidationError as exc:
                raise CommandError(f"password: {' '.join(exc.messages)}") from None
            user.set_password(password)
            user.save()
        Membership.objects.create(user=user, org=found, role=role)
        self.stdout.write(f"{username}: {role} in org {org}")
        if password and not password_stdin:
            self.stdout.write(f"password (shown once): {password}")

    def _list(self, org=None, **_):
        rows = Membership.objects.select_related("user", "org").order_by("org__name", "user__username")
        if org:
            rows = rows.filter(org=_org(org))
        self.stdout.write("user\torg\trole")
        for row in rows:
            self.stdout.write(f"{row.user.username}\t{row.org.name}\t{row.role}")

    def _set_role(self, username, org, role, **_):
        membership = _membership(username, org)
        membership.role = role
        membership.save(update_fields=["role"])
        self.stdout.write(f"{username}: {role} in org {org}")

    def _remove(self, username, org, **_):
        _membership(username, org).delete()
        self.stdout.write(f"{username}: removed from org {org}")


def _org(name: str) -> Org:
    found = Org.objects.filter(name=name).first()
    if found is None:
        raise CommandError(f"no org {name!r}; create it with: manage.py loom_org create {name}")
    return found


def _membership(username: str, org: str) -> Membership:
    found = Membership.objects.filter(user__username=username, org=_org(org)).first()
    if found is None:
        raise CommandError(f"{username} is not in org {org} (see: loom_user list --org {org})")
    return found
