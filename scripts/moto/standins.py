"""Stand-ins for the EC2 actions moto (5.2.5) does not implement and the AWS provider calls.

moto answers CreatePlacementGroup / DescribePlacementGroups and CreateCapacityReservation /
DescribeCapacityReservations with "not implemented" (HTTP 500). ``install()`` adds them to moto's
EC2 response class, storing what was created in memory per (account, region), so the provider's
integration tests (karpenter-aws/tests/it/moto) can resolve `placementGroupSelector` and
`capacityReservationSelectorTerms` against the same server as everything else. An action moto
implements itself is left alone.

What they do, as EC2 documents it (the parts Karpenter reads):

- CreatePlacementGroup: GroupName, Strategy (cluster, partition, spread), PartitionCount,
  SpreadLevel, TagSpecifications; returns the group (GroupId ``pg-...``, State available).
- DescribePlacementGroups: GroupIds or GroupNames (an unknown one is an error, as EC2:
  InvalidPlacementGroup.Unknown / InvalidGroupId.NotFound), filters ``state``, ``strategy``,
  ``group-name``, ``group-id``, ``tag:<key>``, ``tag-key``.
- CreateCapacityReservation: InstanceType, InstancePlatform, AvailabilityZone, InstanceCount,
  InstanceMatchCriteria (default open), EndDate / EndDateType, TagSpecifications; returns the
  reservation (``cr-...``, State active, AvailableInstanceCount = InstanceCount,
  ReservationType default, OwnerId the account). Test-only extras, passed as tags that the
  stand-in consumes rather than stores: ``standin:reservation-type`` (``capacity-block``),
  ``standin:interruptible`` (``true``) and ``standin:available`` (an AvailableInstanceCount).
- DescribeCapacityReservations: CapacityReservationIds (an unknown one is an error:
  InvalidCapacityReservationId.NotFound), filters ``state``, ``owner-id``,
  ``instance-match-criteria``, ``instance-type``, ``availability-zone``, ``tag:<key>``,
  ``tag-key``; reservations whose EndDate has passed read ``expired``.

``/moto-api/reset`` does not clear them; tests use fresh names.
"""

import datetime
import random
import threading

from moto.core.responses import ActionResult
from moto.ec2.responses import EC2Response

_lock = threading.Lock()
_groups = {}  # (account, region) -> {group id: group}
_reservations = {}  # (account, region) -> {reservation id: reservation}


class StandInError(Exception):
    pass


def _hex_id(prefix):
    return prefix + "".join(random.choice("0123456789abcdef") for _ in range(17))


def _tags(response):
    """TagSpecifications as {resource type: {key: value}}."""
    out = {}
    for spec in response._get_param("TagSpecifications", []) or []:
        tags = out.setdefault(spec.get("ResourceType", ""), {})
        for t in spec.get("Tags", []) or []:
            tags[t.get("Key", "")] = t.get("Value", "")
    return out


def _filters(response):
    return [
        (f.get("Name", ""), list(f.get("Values", []) or []))
        for f in (response._get_param("Filters", []) or [])
    ]


def _matches(filters, fields, tags):
    for name, values in filters:
        if name.startswith("tag:"):
            if tags.get(name[4:]) not in values:
                return False
        elif name == "tag-key":
            if not any(v in tags for v in values):
                return False
        elif name in fields:
            if str(fields[name]) not in values:
                return False
        else:
            raise StandInError(f"filter {name!r} is not supported by the stand-in")
    return True


def _error(response, code, message):
    body = (
        '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
        f"<Code>{code}</Code><Message>{message}</Message></Error></Errors>"
        "<RequestID>standin</RequestID></Response>"
    )
    return 400, {"status": 400}, body


def _tag_list(tags):
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def create_placement_group(self):
    self.error_on_dryrun()
    name = self._get_param("GroupName")
    strategy = self._get_param("Strategy") or "cluster"
    group = {
        "GroupName": name,
        "GroupId": _hex_id("pg-"),
        "State": "available",
        "Strategy": strategy,
        "PartitionCount": int(self._get_param("PartitionCount") or (7 if strategy == "partition" else 0)),
        "SpreadLevel": self._get_param("SpreadLevel") or ("rack" if strategy == "spread" else None),
        "GroupArn": None,
        "_tags": _tags(self).get("placement-group", {}),
    }
    group["GroupArn"] = (
        f"arn:aws:ec2:{self.region}:{self.current_account}:placement-group/{name}"
    )
    with _lock:
        groups = _groups.setdefault((self.current_account, self.region), {})
        if any(g["GroupName"] == name for g in groups.values()):
            return _error(self, "InvalidPlacementGroup.Duplicate", f"The Placement Group '{name}' already exists.")
        groups[group["GroupId"]] = group
    return ActionResult({"PlacementGroup": _public(group)})


def _public(obj):
    out = {k: v for k, v in obj.items() if not k.startswith("_") and v is not None}
    if obj.get("_tags"):
        out["Tags"] = _tag_list(obj["_tags"])
    return out


def describe_placement_groups(self):
    self.error_on_dryrun()
    ids = self._get_param("GroupIds", []) or []
    names = self._get_param("GroupNames", []) or []
    filters = _filters(self)
    with _lock:
        groups = list(_groups.get((self.current_account, self.region), {}).values())
    for i in ids:
        if not any(g["GroupId"] == i for g in groups):
            return _error(self, "InvalidGroupId.NotFound", f"The placement group ID '{i}' does not exist")
    for n in names:
        if not any(g["GroupName"] == n for g in groups):
            return _error(self, "InvalidPlacementGroup.Unknown", f"The Placement Group '{n}' is unknown.")
    out = []
    for g in groups:
        if ids and g["GroupId"] not in ids:
            continue
        if names and g["GroupName"] not in names:
            continue
        fields = {"state": g["State"], "strategy": g["Strategy"], "group-name": g["GroupName"], "group-id": g["GroupId"]}
        try:
            if not _matches(filters, fields, g["_tags"]):
                continue
        except StandInError as e:
            return _error(self, "InvalidParameterValue", str(e))
        out.append(_public(g))
    return ActionResult({"PlacementGroups": out})


def create_capacity_reservation(self):
    self.error_on_dryrun()
    tags = dict(_tags(self).get("capacity-reservation", {}))
    reservation_type = tags.pop("standin:reservation-type", "default")
    interruptible = tags.pop("standin:interruptible", "false") == "true"
    count = int(self._get_param("InstanceCount") or 1)
    available = int(tags.pop("standin:available", count))
    now = datetime.datetime.now(datetime.timezone.utc)
    reservation = {
        "CapacityReservationId": _hex_id("cr-"),
        "OwnerId": self.current_account,
        "InstanceType": self._get_param("InstanceType"),
        "InstancePlatform": self._get_param("InstancePlatform") or "Linux/UNIX",
        "AvailabilityZone": self._get_param("AvailabilityZone"),
        "Tenancy": self._get_param("Tenancy") or "default",
        "TotalInstanceCount": count,
        "AvailableInstanceCount": available,
        "State": "active",
        "StartDate": now,
        "EndDate": self._get_param("EndDate"),
        "EndDateType": self._get_param("EndDateType") or "unlimited",
        "InstanceMatchCriteria": self._get_param("InstanceMatchCriteria") or "open",
        "CreateDate": now,
        "ReservationType": reservation_type,
        "Interruptible": interruptible,
        "_tags": tags,
    }
    reservation["CapacityReservationArn"] = (
        f"arn:aws:ec2:{self.region}:{self.current_account}:capacity-reservation/"
        f"{reservation['CapacityReservationId']}"
    )
    with _lock:
        _reservations.setdefault((self.current_account, self.region), {})[
            reservation["CapacityReservationId"]
        ] = reservation
    return ActionResult({"CapacityReservation": _reservation_view(reservation, now)})


def _end(value):
    """EndDate as an aware datetime (moto hands timestamps over naive, in UTC)."""
    if value is None:
        return None
    if not isinstance(value, datetime.datetime):
        value = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value


def _reservation_view(r, now):
    view = _public(r)
    end = _end(r.get("EndDate"))
    if end is not None:
        view["EndDate"] = end
        if end <= now:
            view["State"] = "expired"
    return view


def describe_capacity_reservations(self):
    self.error_on_dryrun()
    ids = self._get_param("CapacityReservationIds", []) or []
    filters = _filters(self)
    now = datetime.datetime.now(datetime.timezone.utc)
    with _lock:
        reservations = list(_reservations.get((self.current_account, self.region), {}).values())
    for i in ids:
        if not any(r["CapacityReservationId"] == i for r in reservations):
            return _error(self, "InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{i}' does not exist")
    out = []
    for r in reservations:
        if ids and r["CapacityReservationId"] not in ids:
            continue
        view = _reservation_view(r, now)
        fields = {
            "state": view["State"],
            "owner-id": r["OwnerId"],
            "instance-match-criteria": r["InstanceMatchCriteria"],
            "instance-type": r["InstanceType"],
            "availability-zone": r["AvailabilityZone"],
        }
        try:
            if not _matches(filters, fields, r["_tags"]):
                continue
        except StandInError as e:
            return _error(self, "InvalidParameterValue", str(e))
        out.append(view)
    return ActionResult({"CapacityReservations": out})


STANDINS = {
    "create_placement_group": create_placement_group,
    "describe_placement_groups": describe_placement_groups,
    "create_capacity_reservation": create_capacity_reservation,
    "describe_capacity_reservations": describe_capacity_reservations,
}


def install():
    """Adds each stand-in moto lacks to its EC2 response class; returns the names added."""
    added = []
    for name, fn in STANDINS.items():
        if getattr(EC2Response, name, None) is None:
            setattr(EC2Response, name, fn)
            added.append(name)
    return added
