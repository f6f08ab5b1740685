// HCI socket definitions from BlueZ's libbluetooth-dev (sockaddr_hci, BTPROTO_HCI,
// HCI_CHANNEL_USER, ...). Used only by the user-channel transport. Headers only: no function
// of libbluetooth is called, so the module does not link it (loading it cost an idle process
// 0.1 MB, docs/performance.md).
#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>

// `ble-hci adapters`: HCIGETDEVLIST and HCIGETDEVINFO are function-like macros (_IOR) that
// Swift cannot import, and ioctl is variadic: both calls are wrapped here.
#include <sys/ioctl.h>
#include <stdlib.h>
#include <errno.h>

/// Fills ids with up to max adapter indexes; returns how many, or -1 with errno set.
static inline int ble_hci_dev_list(int fd, uint16_t *ids, uint16_t max) {
    struct hci_dev_list_req *req = calloc(1, sizeof(*req) + max * sizeof(struct hci_dev_req));
    if (!req) return -1;
    req->dev_num = max;
    int r = ioctl(fd, HCIGETDEVLIST, req);
    int saved = errno;
    if (r == 0) {
        r = req->dev_num;
        for (int i = 0; i < r; i++) ids[i] = req->dev_req[i].dev_id;
    }
    free(req);
    errno = saved;
    return r;
}

/// info->dev_id selects the adapter; returns 0, or -1 with errno set.
static inline int ble_hci_dev_info(int fd, struct hci_dev_info *info) {
    return ioctl(fd, HCIGETDEVINFO, info);
}
