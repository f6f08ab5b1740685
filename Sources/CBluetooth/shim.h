// HCI socket definitions from BlueZ's libbluetooth-dev (sockaddr_hci, BTPROTO_HCI,
// HCI_CHANNEL_USER, ...). Used only by the user-channel transport.
#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
