#!/bin/bash
# Host-side checks of what the guest left in the share, run by run-tests.sh after the VM:
# tshark (on the host; the guest has the same binary but it is slow under TCG) reads the
# capture `ble-hci -t hci0 peripheral -w $SHARE/p.pcap` wrote during the GATT session.
#   Tools/vm/host-checks.sh SHARE_DIR      exit: number of failed checks
set -u
SHARE=${1:?usage: host-checks.sh SHARE_DIR}
PCAP="$SHARE/p.pcap"
failed=0
check() {  # check NAME OK(0/1) [DETAIL]
    if [ "$2" = 0 ]; then echo "PASS $1${3:+: $3}"; else echo "FAIL $1${3:+: $3}"; failed=$((failed + 1)); fi
}
# cli_tests.py section 6: the kernel's ECRED signaling with `peripheral --eatt` (tshark 4.0 names
# the command codes of Core v5.4 Vol 3 Part A 4.25-4.28 but not their fields: those are read
# from the frame's octets, H4 type, ACL header 4, L2CAP header 4, signaling header 4).
EATT_PCAP="$SHARE/eatt.pcap"
if [ -s "$EATT_PCAP" ] && command -v tshark >/dev/null; then
    echo "=== vm-test (host): tshark on the guest's EATT capture $EATT_PCAP"
    sig=$(timeout 60 tshark -r "$EATT_PCAP" -Y 'btl2cap.cmd_code' -T fields -e hci_h4.direction -e btl2cap.cmd_code -e btl2cap.cmd_ident 2>/dev/null)
    # direction (0x01 received, 0x00 sent) and command code
    for want in "0x01 0x17:the kernel's Credit Based Connection Request" "0x00 0x18:our Credit Based Connection Response" \
                "0x01 0x19:the kernel's Credit Based Reconfigure Request" "0x00 0x1a:our Credit Based Reconfigure Response"; do
        check "EATT capture: ${want#*:} (${want%%:*})" "$(awk '{print $1" "$2}' <<<"$sig" | grep -qx "${want%%:*}"; echo $?)"
    done
    octets() { timeout 60 tshark -r "$EATT_PCAP" -Y "$1" -x 2>/dev/null | awk 'NF > 1 && $1 ~ /^[0-9a-f][0-9a-f][0-9a-f][0-9a-f]$/ { for (i = 2; i <= 17 && $i ~ /^[0-9a-f][0-9a-f]$/; i++) printf "%s", $i } END { print "" }'; }
    req=$(octets 'btl2cap.cmd_code == 0x19') rsp=$(octets 'btl2cap.cmd_code == 0x1a')
    check "EATT capture: the Reconfigure Request asks MTU 300 (0x012c, the socket's BT_RCVMTU)" "$([ "${req:26:4}" = 2c01 ]; echo $?)" "$req"
    check "EATT capture: our Reconfigure Response is result 0x0000, successful (4.28)" "$([ "${rsp:26:4}" = 0000 ]; echo $?)" "$rsp"
    bad=$(timeout 60 tshark -r "$EATT_PCAP" -Y '_ws.malformed || _ws.expert.severity == error' 2>/dev/null | wc -l)
    check "EATT capture: no malformed packet" "$(( bad != 0 ))" "$bad"
fi
# cli_tests.py section 7: bluetoothd's EATT client. Its Credit Based Connection Request and
# our Response by tshark's codes; then, on the dynamic CIDs (tshark frames the K-frames but
# does not follow EATT), ATT requests from bluetoothd (SDU length 2 octets, then the opcode,
# Core v5.4 Vol 3 Part A 3.4.3) each answered by its response opcode (+1), not an Error Response.
BTD_PCAP="$SHARE/bluetoothd-eatt.pcap"
if [ -s "$BTD_PCAP" ] && command -v tshark >/dev/null; then
    echo "=== vm-test (host): tshark on the guest's bluetoothd capture $BTD_PCAP"
    sig=$(timeout 60 tshark -r "$BTD_PCAP" -Y 'btl2cap.cmd_code' -T fields -e hci_h4.direction -e btl2cap.cmd_code 2>/dev/null)
    check "bluetoothd capture: its Credit Based Connection Request (0x17) and our Response (0x18)" \
        "$(grep -qx $'0x01\t0x17' <<<"$sig" && grep -qx $'0x00\t0x18' <<<"$sig"; echo $?)"
    kframes=$(timeout 60 tshark -r "$BTD_PCAP" -Y 'btl2cap.cid >= 0x0040 && btl2cap.payload' -T fields -e hci_h4.direction -e btl2cap.payload 2>/dev/null)
    # Received requests' opcodes, sent answers' opcodes (the third octet of a first K-frame).
    requests=$(awk '$1 == "0x01" { print substr($2, 5, 2) }' <<<"$kframes" | sort -u)
    answers=$(awk '$1 == "0x00" { print substr($2, 5, 2) }' <<<"$kframes" | sort -u)
    unanswered=""
    for op in $requests; do
        want=$(printf '%02x' $(( 16#$op + 1 )))
        grep -qx "$want" <<<"$answers" || unanswered="$unanswered $op"
    done
    check "bluetoothd capture: ATT requests on the EATT channels ($(tr '\n' ' ' <<<"$requests")) each answered by its response ($(tr '\n' ' ' <<<"$answers"))" \
        "$([ -n "$requests" ] && [ -z "$unanswered" ] && ! grep -qx 01 <<<"$answers"; echo $?)" "${unanswered:+unanswered:$unanswered}"
fi
echo "=== vm-test (host): tshark on the guest's capture $PCAP"
if [ ! -s "$PCAP" ]; then
    check "the guest wrote $PCAP" 1 "missing or empty (the GATT session did not run, see above)"
    exit "$failed"
fi
command -v tshark >/dev/null || { check "tshark is installed (Tools/setup.sh)" 1; exit "$failed"; }
info=$(timeout 60 capinfos -t -E -c "$PCAP" 2>&1)
check "capinfos: pcap with Bluetooth H4 with linux header (linktype 201)" \
    "$(grep -q 'Bluetooth H4 with linux header' <<<"$info"; echo $?)" "$(tr -s ' \n' ' ' <<<"$info")"
all=$(timeout 60 tshark -r "$PCAP" 2>&1); rc=$?
n=$(grep -c . <<<"$all")
check "tshark reads it (exit $rc, $n packets)" "$(( rc != 0 || n < 20 ))" "$( [ $rc != 0 ] && tail -3 <<<"$all")"
malformed=$(timeout 60 tshark -r "$PCAP" -Y '_ws.malformed || _ws.expert.severity == error' 2>/dev/null | wc -l)
check "no malformed packet" "$(( malformed != 0 ))" "$malformed"
att=$(timeout 60 tshark -r "$PCAP" -Y btatt -T fields -e btatt.opcode -e btatt.error_code 2>/dev/null)
n_att=$(grep -c . <<<"$att")
check "ATT PDUs in the capture ($n_att)" "$(( n_att < 10 ))"
for want in "0x10:Read By Group Type Request" "0x08:Read By Type Request" "0x04:Find Information Request" \
            "0x0a:Read Request" "0x12:Write Request" "0x13:Write Response" "0x02:Exchange MTU Request"; do
    op=${want%%:*}
    check "tshark sees $want ($op)" "$(grep -qE "^$op(\s|$)" <<<"$att"; echo $?)"
done
check "tshark sees the refused write: Error Response (0x01) with Write Not Permitted (0x03)" \
    "$(grep -qE '^0x01\s+0x03' <<<"$att"; echo $?)"
adv=$(timeout 60 tshark -r "$PCAP" -Y 'bthci_cmd.device_name == "ble-hci" || btcommon.eir_ad.entry.device_name == "ble-hci"' 2>/dev/null | wc -l)
check "tshark sees the advertising data with the name ble-hci" "$(( adv == 0 ))" "$adv packets"
echo "=== vm-test (host): $failed check(s) failed"
exit "$failed"
